// The ABI header: layout is fixed and identical for C and C++, 32- and
// 64-bit (only fixed-width types, explicit padding).
#include <gtest/gtest.h>

#include <cstddef>

#include "uapi/multiedge.h"

TEST(Uapi, QueryLayoutIsTheFirstPublishedOne)
{
	EXPECT_EQ(sizeof(me_query), static_cast<size_t>(ME_QUERY_SIZE_VER0));
	EXPECT_EQ(offsetof(me_query, size), 0u);
	EXPECT_EQ(offsetof(me_query, abi_version), 4u);
	EXPECT_EQ(offsetof(me_query, features), 8u);
	EXPECT_EQ(offsetof(me_query, ethertype), 12u);
	EXPECT_EQ(offsetof(me_query, __reserved), 14u);
	EXPECT_EQ(offsetof(me_query, rx_frames), 16u);
	EXPECT_EQ(offsetof(me_query, rx_dropped), 24u);
	EXPECT_EQ(alignof(me_query), 8u);
}

TEST(Uapi, QueryCommandCarriesNoSize)
{
	// Extensible commands pass their size in the struct, not the number.
	EXPECT_EQ(_IOC_SIZE(ME_IOC_QUERY), 0u);
	EXPECT_EQ(_IOC_TYPE(ME_IOC_QUERY), static_cast<unsigned>(ME_IOC_MAGIC));
}

TEST(Uapi, DefaultEthertypeIsLocalExperimental)
{
	EXPECT_EQ(ME_DEFAULT_ETHERTYPE, 0x88B5);
}
