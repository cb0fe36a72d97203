// The ABI header: layout is fixed and identical for C and C++, 32- and
// 64-bit (only fixed-width types, explicit padding).
#include <gtest/gtest.h>

#include <cstddef>

#include "uapi/multiedge.h"

TEST(Uapi, QueryLayoutExtendsTheFirstPublishedOne)
{
	EXPECT_EQ(sizeof(me_query), static_cast<size_t>(ME_QUERY_SIZE_VER1));
	EXPECT_EQ(offsetof(me_query, size), 0u);
	EXPECT_EQ(offsetof(me_query, abi_version), 4u);
	EXPECT_EQ(offsetof(me_query, features), 8u);
	EXPECT_EQ(offsetof(me_query, ethertype), 12u);
	EXPECT_EQ(offsetof(me_query, __reserved), 14u);
	EXPECT_EQ(offsetof(me_query, rx_frames), 16u);
	EXPECT_EQ(offsetof(me_query, rx_dropped), 24u);
	EXPECT_EQ(offsetof(me_query, pinned_pages), static_cast<size_t>(ME_QUERY_SIZE_VER0));
	EXPECT_EQ(offsetof(me_query, regions), 40u);
	EXPECT_EQ(alignof(me_query), 8u);
}

TEST(Uapi, LinkStructLayouts)
{
	EXPECT_EQ(sizeof(me_link_req), static_cast<size_t>(ME_LINK_REQ_SIZE_VER0));
	EXPECT_EQ(offsetof(me_link_req, ifname), 8u);
	EXPECT_EQ(sizeof(me_link_info), static_cast<size_t>(ME_LINK_INFO_SIZE_VER0));
	EXPECT_EQ(offsetof(me_link_info, ifindex), 16u);
	EXPECT_EQ(offsetof(me_link_info, rx_frames), 32u);
	EXPECT_EQ(sizeof(me_link_list), static_cast<size_t>(ME_LINK_LIST_SIZE_VER0));
	EXPECT_EQ(offsetof(me_link_list, links), 8u);
	EXPECT_EQ(offsetof(me_link_list, info_size), 16u);
}

TEST(Uapi, MemoryRegionStructLayouts)
{
	EXPECT_EQ(sizeof(me_mr_reg), static_cast<size_t>(ME_MR_REG_SIZE_VER0));
	EXPECT_EQ(offsetof(me_mr_reg, addr), 8u);
	EXPECT_EQ(offsetof(me_mr_reg, length), 16u);
	EXPECT_EQ(offsetof(me_mr_reg, region), 24u);
	EXPECT_EQ(offsetof(me_mr_reg, key), 28u);
	EXPECT_EQ(sizeof(me_mr_dereg), static_cast<size_t>(ME_MR_DEREG_SIZE_VER0));
	EXPECT_EQ(ME_ACCESS_ALL, ME_ACCESS_REMOTE_READ | ME_ACCESS_REMOTE_WRITE);
}

TEST(Uapi, CommandsCarryNoSize)
{
	// Extensible commands pass their size in the struct, not the number.
	for (unsigned long cmd : {ME_IOC_QUERY, ME_IOC_LINK_ATTACH, ME_IOC_LINK_DETACH,
				  ME_IOC_LINK_LIST, ME_IOC_MR_REG, ME_IOC_MR_DEREG}) {
		EXPECT_EQ(_IOC_SIZE(cmd), 0u) << cmd;
		EXPECT_EQ(_IOC_TYPE(cmd), static_cast<unsigned>(ME_IOC_MAGIC)) << cmd;
	}
}

TEST(Uapi, DefaultEthertypeIsLocalExperimental)
{
	EXPECT_EQ(ME_DEFAULT_ETHERTYPE, 0x88B5);
}
