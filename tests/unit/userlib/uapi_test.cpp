// The ABI header: layout is fixed and identical for C and C++, 32- and
// 64-bit (only fixed-width types, explicit padding).
#include <gtest/gtest.h>

#include <cstddef>

#include "multiedge/multiedge.hpp"
#include "uapi/multiedge.h"

TEST(Uapi, AbiVersionAndLastCounter)
{
	EXPECT_EQ(ME_ABI_VERSION, 29);
	EXPECT_EQ(ME_STAT_ACK_NOW, 56);
	EXPECT_EQ(ME_STAT_CC_IDLE, ME_STAT_COUNT - 1);
	EXPECT_EQ(ME_FEATURE_URING_CMD, 1u);
	EXPECT_EQ(ME_FEATURE_RX_AREA, 2u);
	EXPECT_EQ(ME_FEATURE_RECV_POLL, 4u);
	EXPECT_EQ(ME_FEATURE_PORTS, 8u);
	EXPECT_EQ(ME_FEATURE_POST_MORE, 16u);
	EXPECT_EQ(ME_FEATURE_SHARED, 32u);
	EXPECT_EQ(ME_FEATURE_ATOMIC, 64u);
	EXPECT_EQ(ME_FEATURE_LOOPBACK, 128u);
	EXPECT_EQ(ME_FEATURE_SEND_LARGE, 256u);
	EXPECT_EQ(ME_FEATURE_ACK_NOW, 512u);
	EXPECT_EQ(ME_POST_F_ACK_NOW, 4u);
	EXPECT_EQ(ME_SEND_MAX, 65536);
	EXPECT_EQ(ME_SEND_MAX_VER0, 1024);
	EXPECT_EQ(ME_CONN_LOOPBACK, 0xffffffffu);
	EXPECT_EQ(ME_OP_ATOMIC, 5u);
	EXPECT_EQ(ME_CQ_ATOMIC, 7u);
	EXPECT_EQ(ME_ATOMIC_ADD, 1u);
	EXPECT_EQ(ME_ATOMIC_CSWAP, 6u);
	EXPECT_EQ(ME_ATOMIC_READ, 11u);
	EXPECT_EQ(ME_POST_F_MORE, 2u);
	EXPECT_EQ(ME_CONNECT_F_ORDERED, 1u);
	EXPECT_EQ(ME_CONNECT_F_SHARED, 2u);
	EXPECT_EQ(ME_CONN_I_ORDERED, 1u);
	EXPECT_EQ(ME_CONN_I_ACTIVE, 2u);
	EXPECT_EQ(ME_CONN_I_SHARED, 4u);
}

// The io_uring door: the pointer form fills a 64-byte SQE's 16-byte cmd
// area exactly, and the inline form fits a 128-byte SQE's 80 bytes.
TEST(Uapi, UringCommandLayouts)
{
	EXPECT_EQ(sizeof(me_uring_ptr), static_cast<size_t>(ME_URING_CMD_SIZE));
	EXPECT_EQ(offsetof(me_uring_ptr, arg), 0u);
	EXPECT_EQ(offsetof(me_uring_ptr, __reserved), 8u);
	EXPECT_LE(sizeof(me_post), static_cast<size_t>(ME_URING_CMD_SIZE_SQE128));
}

TEST(Uapi, QueryLayoutExtendsThePublishedOnes)
{
	EXPECT_EQ(sizeof(me_query), 168u);
	EXPECT_EQ(sizeof(me_query), static_cast<size_t>(ME_QUERY_SIZE_VER6));
	EXPECT_EQ(offsetof(me_query, heads_reused), static_cast<size_t>(ME_QUERY_SIZE_VER5));
	EXPECT_EQ(offsetof(me_query, heads_fresh), 160u);
	EXPECT_EQ(offsetof(me_query, trains_segmented), static_cast<size_t>(ME_QUERY_SIZE_VER4));
	EXPECT_EQ(offsetof(me_query, area_pages), static_cast<size_t>(ME_QUERY_SIZE_VER3));
	EXPECT_EQ(offsetof(me_query, pool_pages), 112u);
	EXPECT_EQ(offsetof(me_query, rx_flipped), 120u);
	EXPECT_EQ(offsetof(me_query, rx_flip_copied), 128u);
	EXPECT_EQ(offsetof(me_query, tlb_flushes), 136u);
	EXPECT_EQ(offsetof(me_query, zc_skbs), static_cast<size_t>(ME_QUERY_SIZE_VER2));
	EXPECT_EQ(offsetof(me_query, staged_pages), 96u);
	EXPECT_EQ(offsetof(me_query, size), 0u);
	EXPECT_EQ(offsetof(me_query, abi_version), 4u);
	EXPECT_EQ(offsetof(me_query, features), 8u);
	EXPECT_EQ(offsetof(me_query, ethertype), 12u);
	EXPECT_EQ(offsetof(me_query, __reserved), 14u);
	EXPECT_EQ(offsetof(me_query, rx_frames), 16u);
	EXPECT_EQ(offsetof(me_query, rx_dropped), 24u);
	EXPECT_EQ(offsetof(me_query, pinned_pages), static_cast<size_t>(ME_QUERY_SIZE_VER0));
	EXPECT_EQ(offsetof(me_query, regions), 40u);
	EXPECT_EQ(offsetof(me_query, node_id), static_cast<size_t>(ME_QUERY_SIZE_VER1));
	EXPECT_EQ(offsetof(me_query, incarnation), 52u);
	EXPECT_EQ(offsetof(me_query, packet_size), 56u);
	EXPECT_EQ(offsetof(me_query, __reserved2), 60u);
	EXPECT_EQ(offsetof(me_query, rx_queued), 64u);
	EXPECT_EQ(offsetof(me_query, conns), 72u);
	EXPECT_EQ(offsetof(me_query, ops_inflight), 80u);
	EXPECT_EQ(alignof(me_query), 8u);
}

TEST(Uapi, LinkStructLayouts)
{
	EXPECT_EQ(sizeof(me_link_req), static_cast<size_t>(ME_LINK_REQ_SIZE_VER0));
	EXPECT_EQ(offsetof(me_link_req, ifname), 8u);
	EXPECT_EQ(sizeof(me_link_info), 136u);
	EXPECT_EQ(sizeof(me_link_info), static_cast<size_t>(ME_LINK_INFO_SIZE_VER5));
	EXPECT_EQ(offsetof(me_link_info, rx_direct), static_cast<size_t>(ME_LINK_INFO_SIZE_VER3));
	EXPECT_EQ(offsetof(me_link_info, tx_trains), static_cast<size_t>(ME_LINK_INFO_SIZE_VER4));
	EXPECT_EQ(offsetof(me_link_info, rx_trains), 128u);
	EXPECT_EQ(offsetof(me_link_info, nbrs), static_cast<size_t>(ME_LINK_INFO_SIZE_VER2));
	EXPECT_EQ(offsetof(me_link_info, nbrs_alive), 108u);
	EXPECT_EQ(offsetof(me_link_info, tx_zc_frames), static_cast<size_t>(ME_LINK_INFO_SIZE_VER1));
	EXPECT_EQ(offsetof(me_link_info, ifindex), 16u);
	EXPECT_EQ(offsetof(me_link_info, mtu), 20u);
	EXPECT_EQ(offsetof(me_link_info, flags), 24u);
	EXPECT_EQ(offsetof(me_link_info, index), 28u);
	EXPECT_EQ(offsetof(me_link_info, rx_frames), 32u);
	EXPECT_EQ(offsetof(me_link_info, rx_bytes), 40u);
	EXPECT_EQ(offsetof(me_link_info, peer_node), static_cast<size_t>(ME_LINK_INFO_SIZE_VER0));
	EXPECT_EQ(offsetof(me_link_info, rate_mbps), 52u);
	EXPECT_EQ(offsetof(me_link_info, tx_frames), 56u);
	EXPECT_EQ(offsetof(me_link_info, tx_bytes), 64u);
	EXPECT_EQ(offsetof(me_link_info, rx_dropped), 72u);
	EXPECT_EQ(offsetof(me_link_info, tx_errors), 80u);
	EXPECT_EQ(offsetof(me_link_info, rx_copied), 88u);
	EXPECT_EQ(sizeof(me_link_list), static_cast<size_t>(ME_LINK_LIST_SIZE_VER0));
	EXPECT_EQ(offsetof(me_link_list, links), 8u);
	EXPECT_EQ(offsetof(me_link_list, info_size), 16u);
}

TEST(Uapi, MemoryRegionStructLayouts)
{
	EXPECT_EQ(sizeof(me_mr_reg), static_cast<size_t>(ME_MR_REG_SIZE_VER2));
	EXPECT_EQ(offsetof(me_mr_reg, key_hi), static_cast<size_t>(ME_MR_REG_SIZE_VER1));
	EXPECT_EQ(offsetof(me_mr_reg, flags), static_cast<size_t>(ME_MR_REG_SIZE_VER0));
	EXPECT_EQ(offsetof(me_mr_reg, info), 36u);
	EXPECT_EQ(ME_MR_FLAGS_ALL, ME_MR_RX_COPY | ME_MR_TLB_EAGER | ME_MR_TLB_LAZY);
	EXPECT_EQ(offsetof(me_mr_reg, addr), 8u);
	EXPECT_EQ(offsetof(me_mr_reg, length), 16u);
	EXPECT_EQ(offsetof(me_mr_reg, region), 24u);
	EXPECT_EQ(offsetof(me_mr_reg, key), 28u);
	EXPECT_EQ(sizeof(me_mr_dereg), static_cast<size_t>(ME_MR_DEREG_SIZE_VER0));
	EXPECT_EQ(ME_ACCESS_ALL, ME_ACCESS_REMOTE_READ | ME_ACCESS_REMOTE_WRITE);
}

TEST(Uapi, PeerStructLayouts)
{
	EXPECT_EQ(sizeof(me_peer_info), 64u);
	EXPECT_EQ(sizeof(me_peer_info), static_cast<size_t>(ME_PEER_INFO_SIZE_VER1));
	EXPECT_EQ(offsetof(me_peer_info, name), static_cast<size_t>(ME_PEER_INFO_SIZE_VER0));
	EXPECT_EQ(offsetof(me_peer_info, conns), 56u);
	EXPECT_EQ(offsetof(me_peer_info, __reserved2), 60u);
	EXPECT_EQ(offsetof(me_peer_info, incarnation), 4u);
	EXPECT_EQ(offsetof(me_peer_info, links), 8u);
	EXPECT_EQ(offsetof(me_peer_info, alive_links), 12u);
	EXPECT_EQ(offsetof(me_peer_info, flags), 16u);
	EXPECT_EQ(offsetof(me_peer_info, __reserved), 20u);
	EXPECT_EQ(sizeof(me_peer_list), static_cast<size_t>(ME_PEER_LIST_SIZE_VER0));
	EXPECT_EQ(offsetof(me_peer_list, peers), 8u);
	EXPECT_EQ(offsetof(me_peer_list, info_size), 16u);
}

TEST(Uapi, NeighbourStructLayouts)
{
	EXPECT_EQ(sizeof(me_nbr_info), 104u);
	EXPECT_EQ(sizeof(me_nbr_info), static_cast<size_t>(ME_NBR_INFO_SIZE_VER3));
	EXPECT_EQ(offsetof(me_nbr_info, target_us), static_cast<size_t>(ME_NBR_INFO_SIZE_VER2));
	EXPECT_EQ(offsetof(me_nbr_info, cwnd), static_cast<size_t>(ME_NBR_INFO_SIZE_VER0));
	EXPECT_EQ(offsetof(me_nbr_info, data_delay_us), static_cast<size_t>(ME_NBR_INFO_SIZE_VER1));
	EXPECT_EQ(offsetof(me_nbr_info, link), 0u);
	EXPECT_EQ(offsetof(me_nbr_info, node_id), 4u);
	EXPECT_EQ(offsetof(me_nbr_info, incarnation), 8u);
	EXPECT_EQ(offsetof(me_nbr_info, flags), 12u);
	EXPECT_EQ(offsetof(me_nbr_info, mac), 16u);
	EXPECT_EQ(offsetof(me_nbr_info, rtt_us), 24u);
	EXPECT_EQ(offsetof(me_nbr_info, rate_mbps), 28u);
	EXPECT_EQ(offsetof(me_nbr_info, inflight), 32u);
	EXPECT_EQ(offsetof(me_nbr_info, rx_age_ms), 36u);
	EXPECT_EQ(offsetof(me_nbr_info, tx_pkts), 40u);
	EXPECT_EQ(offsetof(me_nbr_info, rx_pkts), 48u);
	EXPECT_EQ(offsetof(me_nbr_info, lost_pkts), 56u);
	EXPECT_EQ(offsetof(me_nbr_info, tx_bytes), 64u);
	EXPECT_EQ(offsetof(me_nbr_info, rx_bytes), 72u);
	EXPECT_EQ(sizeof(me_nbr_list), static_cast<size_t>(ME_NBR_LIST_SIZE_VER0));
	EXPECT_EQ(offsetof(me_nbr_list, count), 4u);
	EXPECT_EQ(offsetof(me_nbr_list, nbrs), 8u);
	EXPECT_EQ(offsetof(me_nbr_list, info_size), 16u);
	EXPECT_EQ(offsetof(me_nbr_list, __reserved), 20u);
}

TEST(Uapi, ConnectionStructLayouts)
{
	EXPECT_EQ(sizeof(me_connect), 24u);
	EXPECT_EQ(sizeof(me_connect), static_cast<size_t>(ME_CONNECT_SIZE_VER0));
	EXPECT_EQ(offsetof(me_connect, flags), 4u);
	EXPECT_EQ(offsetof(me_connect, peer), 8u);
	EXPECT_EQ(offsetof(me_connect, timeout_ms), 12u);
	EXPECT_EQ(offsetof(me_connect, conn), 16u);
	EXPECT_EQ(offsetof(me_connect, port), 20u);
	EXPECT_EQ(ME_PORT_MAX, 0xffffu);
	EXPECT_EQ(sizeof(me_bind), 16u);
	EXPECT_EQ(sizeof(me_bind), static_cast<size_t>(ME_BIND_SIZE_VER0));
	EXPECT_EQ(offsetof(me_bind, flags), 4u);
	EXPECT_EQ(offsetof(me_bind, port), 8u);
	EXPECT_EQ(offsetof(me_bind, __reserved), 12u);
	EXPECT_EQ(ME_PORT_EPHEMERAL, 32768u);
	EXPECT_EQ(sizeof(me_disconnect), 8u);
	EXPECT_EQ(sizeof(me_disconnect), static_cast<size_t>(ME_DISCONNECT_SIZE_VER0));
	EXPECT_EQ(offsetof(me_disconnect, conn), 4u);

	EXPECT_EQ(sizeof(me_conn_info), 88u);
	EXPECT_EQ(offsetof(me_conn_info, port), static_cast<size_t>(ME_CONN_INFO_SIZE_VER0));
	EXPECT_EQ(offsetof(me_conn_info, __reserved), 84u);
	EXPECT_EQ(offsetof(me_conn_info, peer), 4u);
	EXPECT_EQ(offsetof(me_conn_info, state), 8u);
	EXPECT_EQ(offsetof(me_conn_info, flags), 12u);
	EXPECT_EQ(offsetof(me_conn_info, tx_packets), 16u);
	EXPECT_EQ(offsetof(me_conn_info, tx_bytes), 24u);
	EXPECT_EQ(offsetof(me_conn_info, retransmits), 32u);
	EXPECT_EQ(offsetof(me_conn_info, rx_packets), 40u);
	EXPECT_EQ(offsetof(me_conn_info, rx_bytes), 48u);
	EXPECT_EQ(offsetof(me_conn_info, rx_dropped), 56u);
	EXPECT_EQ(offsetof(me_conn_info, errors), 64u);
	EXPECT_EQ(offsetof(me_conn_info, copies), 72u);
	EXPECT_EQ(sizeof(me_conn_list), static_cast<size_t>(ME_CONN_LIST_SIZE_VER0));
	EXPECT_EQ(offsetof(me_conn_list, conns), 8u);
	EXPECT_EQ(offsetof(me_conn_list, info_size), 16u);
}

TEST(Uapi, PostAndCompletionLayouts)
{
	// ABI 18 appended port and a reserved word: the first 64 bytes are
	// the published ME_POST_SIZE_VER0 struct, unchanged.
	EXPECT_EQ(sizeof(me_post), 72u);
	EXPECT_EQ(sizeof(me_post), static_cast<size_t>(ME_POST_SIZE_VER1));
	EXPECT_EQ(ME_POST_SIZE_VER0, 64);
	EXPECT_EQ(offsetof(me_post, port), static_cast<size_t>(ME_POST_SIZE_VER0));
	EXPECT_EQ(offsetof(me_post, __reserved), 68u);
	EXPECT_EQ(alignof(me_post), 8u);
	EXPECT_EQ(offsetof(me_post, opcode), 4u);
	EXPECT_EQ(offsetof(me_post, flags), 8u);
	EXPECT_EQ(offsetof(me_post, conn), 12u);
	EXPECT_EQ(offsetof(me_post, cookie), 16u);
	EXPECT_EQ(offsetof(me_post, local_region), 24u);
	EXPECT_EQ(offsetof(me_post, len), 28u);
	EXPECT_EQ(offsetof(me_post, local_off), 32u);
	EXPECT_EQ(offsetof(me_post, remote_region), 40u);
	EXPECT_EQ(offsetof(me_post, remote_key), 44u);
	EXPECT_EQ(offsetof(me_post, remote_off), 48u);
	EXPECT_EQ(offsetof(me_post, imm), 56u);
	EXPECT_EQ(offsetof(me_post, remote_key_hi), 60u);

	EXPECT_EQ(sizeof(me_completion), 48u);
	EXPECT_EQ(sizeof(me_completion), static_cast<size_t>(ME_COMPLETION_SIZE_VER0));
	EXPECT_EQ(offsetof(me_completion, type), 8u);
	EXPECT_EQ(offsetof(me_completion, status), 12u);
	EXPECT_EQ(offsetof(me_completion, conn), 16u);
	EXPECT_EQ(offsetof(me_completion, peer), 20u);
	EXPECT_EQ(offsetof(me_completion, len), 24u);
	EXPECT_EQ(offsetof(me_completion, imm), 28u);
	EXPECT_EQ(offsetof(me_completion, region), 32u);
	EXPECT_EQ(offsetof(me_completion, __reserved), 36u);
	EXPECT_EQ(offsetof(me_completion, off), 40u);

	EXPECT_EQ(sizeof(me_poll_cq), 32u);
	EXPECT_EQ(sizeof(me_poll_cq), static_cast<size_t>(ME_POLL_CQ_SIZE_VER0));
	EXPECT_EQ(offsetof(me_poll_cq, flags), 4u);
	EXPECT_EQ(offsetof(me_poll_cq, count), 8u);
	EXPECT_EQ(offsetof(me_poll_cq, entry_size), 12u);
	EXPECT_EQ(offsetof(me_poll_cq, entries), 16u);
	EXPECT_EQ(offsetof(me_poll_cq, timeout_ms), 24u);
	EXPECT_EQ(offsetof(me_poll_cq, overflow), 28u);
}

TEST(Uapi, RecvAndStatsLayouts)
{
	EXPECT_EQ(sizeof(me_recv), 40u);
	EXPECT_EQ(sizeof(me_recv), static_cast<size_t>(ME_RECV_SIZE_VER1));
	EXPECT_EQ(ME_RECV_SIZE_VER0, 32);
	EXPECT_EQ(offsetof(me_recv, port), static_cast<size_t>(ME_RECV_SIZE_VER0));
	EXPECT_EQ(offsetof(me_recv, __reserved), 36u);
	EXPECT_EQ(alignof(me_recv), 8u);
	EXPECT_EQ(offsetof(me_recv, flags), 4u);
	EXPECT_EQ(offsetof(me_recv, peer), 8u);
	EXPECT_EQ(offsetof(me_recv, len), 12u);
	EXPECT_EQ(offsetof(me_recv, buf), 16u);
	EXPECT_EQ(offsetof(me_recv, timeout_ms), 24u);
	EXPECT_EQ(offsetof(me_recv, conn), 28u);

	EXPECT_EQ(sizeof(me_stats), 16u);
	EXPECT_EQ(sizeof(me_stats), static_cast<size_t>(ME_STATS_SIZE_VER0));
	EXPECT_EQ(offsetof(me_stats, count), 4u);
	EXPECT_EQ(offsetof(me_stats, values), 8u);
	// Counters are only ever appended: the first 24 keep their index.
	EXPECT_EQ(ME_STAT_CREDIT_STALL, 23);
	EXPECT_GT(ME_STAT_RX_HELLO_HELD, ME_STAT_CREDIT_STALL);
	EXPECT_GT(ME_STAT_PEER_RESTART, ME_STAT_CREDIT_STALL);
}

TEST(Uapi, LibraryEnumsMatchTheAbi)
{
	using multiedge::CompletionType;
	EXPECT_EQ(static_cast<unsigned>(CompletionType::Write), ME_CQ_WRITE);
	EXPECT_EQ(static_cast<unsigned>(CompletionType::Read), ME_CQ_READ);
	EXPECT_EQ(static_cast<unsigned>(CompletionType::Notify), ME_CQ_NOTIFY);
	EXPECT_EQ(static_cast<unsigned>(CompletionType::Send), ME_CQ_SEND);
	EXPECT_EQ(static_cast<unsigned>(CompletionType::ConnClosed), ME_CQ_CONN_CLOSED);
	EXPECT_EQ(static_cast<unsigned>(CompletionType::ConnDead), ME_CQ_CONN_DEAD);
	EXPECT_EQ(static_cast<unsigned>(multiedge::Access::RemoteRead), ME_ACCESS_REMOTE_READ);
	EXPECT_EQ(static_cast<unsigned>(multiedge::Access::RemoteWrite), ME_ACCESS_REMOTE_WRITE);
}

TEST(Uapi, CommandsCarryNoSize)
{
	// Extensible commands pass their size in the struct, not the number.
	for (unsigned long cmd :
	     {ME_IOC_QUERY, ME_IOC_LINK_ATTACH, ME_IOC_LINK_DETACH, ME_IOC_LINK_LIST, ME_IOC_MR_REG,
	      ME_IOC_MR_DEREG, ME_IOC_PEER_LIST, ME_IOC_CONN_LIST, ME_IOC_STATS, ME_IOC_CONNECT,
	      ME_IOC_DISCONNECT, ME_IOC_POST, ME_IOC_POLL_CQ, ME_IOC_RECV}) {
		EXPECT_EQ(_IOC_SIZE(cmd), 0u) << cmd;
		EXPECT_EQ(_IOC_TYPE(cmd), static_cast<unsigned>(ME_IOC_MAGIC)) << cmd;
	}
}

TEST(Uapi, DefaultEthertypeIsLocalExperimental)
{
	EXPECT_EQ(ME_DEFAULT_ETHERTYPE, 0x88B5);
}
