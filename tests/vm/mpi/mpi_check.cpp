// An unchanged MPI program (it knows nothing of multiedge): point-to-point
// exchanges of every size class with their data checked, then the
// collectives an application leans on, then one-sided operations on a
// window.  tests/vm/mpi/mpi-openmpi runs it
// over the libfabric provider; it prints what it measured and exits 0 only
// when every check held.
//
//   mpi_check [ITERS]    ping-pong round trips per size (50; a fifth of it,
//                        at least 2, for 1 MiB)
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

int failures = 0;

void check(bool ok, const char *what, int rank)
{
	if (!ok) {
		std::fprintf(stderr, "mpi_check: rank %d: %s\n", rank, what);
		failures++;
	}
}

std::uint8_t byte_of(std::size_t i, int seed)
{
	return static_cast<std::uint8_t>(i * 131 + static_cast<std::size_t>(seed) * 7 + 1);
}

// What a ping-pong message that differs holds instead: where it first
// differs, and whose data it is (another iteration's of either rank, or
// none), so that a rare failure says more than that it happened.  Seeds
// 256 apart fill alike: the one nearest the expected seed is named.
void report_mismatch(const std::vector<std::uint8_t> &in, std::size_t len, int it, std::size_t at,
		     int seed, int count, const MPI_Status &st)
{
	std::size_t wrong = 0;
	for (std::size_t i = 0; i < len; i++)
		wrong += in[i] != byte_of(i, seed);
	auto holds = [&](int s) {
		for (std::size_t i = 0; i < len; i++)
			if (in[i] != byte_of(i, s))
				return false;
		return true;
	};
	int whose = -1;
	for (int d = 1; d < 256 && whose < 0; d++) {
		if (seed - d >= 0 && holds(seed - d))
			whose = seed - d;
		else if (holds(seed + d))
			whose = seed + d;
	}
	std::fprintf(stderr,
		     "mpi_check:   %zu B, iteration %d (tag %d, from %d, count %d): byte %zu is %u, "
		     "not %u; %zu of %zu bytes differ; the data is %s",
		     len, it, st.MPI_TAG, st.MPI_SOURCE, count, at, static_cast<unsigned>(in[at]),
		     static_cast<unsigned>(byte_of(at, seed)), wrong, len,
		     whose < 0 ? "no iteration's" : "iteration ");
	if (whose >= 0)
		std::fprintf(stderr, "%d's of rank %d", whose / 2, whose % 2);
	std::fprintf(stderr, "\n");
}

// Rank 0 and rank 1 bounce `len` bytes `iters` times; each side checks
// every message it receives.  Returns the mean one-way time in us.
double pingpong(int rank, std::size_t len, int iters)
{
	std::vector<std::uint8_t> out(len), in(len);
	double t0 = MPI_Wtime();
	for (int it = 0; it < iters; it++) {
		int seed = it * 2 + (rank == 0 ? 0 : 1);
		for (std::size_t i = 0; i < len; i++)
			out[i] = byte_of(i, seed);
		MPI_Status st;
		if (rank == 0) {
			MPI_Send(out.data(), static_cast<int>(len), MPI_BYTE, 1, it, MPI_COMM_WORLD);
			MPI_Recv(in.data(), static_cast<int>(len), MPI_BYTE, 1, it, MPI_COMM_WORLD, &st);
		} else {
			MPI_Recv(in.data(), static_cast<int>(len), MPI_BYTE, 0, it, MPI_COMM_WORLD, &st);
			MPI_Send(out.data(), static_cast<int>(len), MPI_BYTE, 0, it, MPI_COMM_WORLD);
		}
		int count = -1;
		MPI_Get_count(&st, MPI_BYTE, &count);
		check(count == static_cast<int>(len), "ping-pong: wrong length", rank);
		int peer_seed = it * 2 + (rank == 0 ? 1 : 0);
		for (std::size_t i = 0; i < len; i++)
			if (in[i] != byte_of(i, peer_seed)) {
				check(false, "ping-pong: payload differs", rank);
				report_mismatch(in, len, it, i, peer_seed, count, st);
				break;
			}
	}
	return (MPI_Wtime() - t0) * 1e6 / (2.0 * iters);
}

} // namespace

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank = 0, size = 0;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size < 2) {
		std::fprintf(stderr, "mpi_check: needs 2 ranks or more, has %d\n", size);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}

	int iters_small = 50;
	if (argc > 1) {
		char *end = nullptr;
		long v = std::strtol(argv[1], &end, 10);
		if (*end || v < 1 || v > 100000) {
			if (rank == 0)
				std::fprintf(stderr, "mpi_check: ITERS must be 1..100000, not '%s'\n", argv[1]);
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
		iters_small = static_cast<int>(v);
	}
	if (rank < 2) {
		for (std::size_t len : {std::size_t{8}, std::size_t{900}, std::size_t{4096},
					std::size_t{65536}, std::size_t{1} << 20}) {
			int iters = len >= (1u << 20) ? std::max(2, iters_small / 5) : iters_small;
			double us = pingpong(rank, len, iters);
			if (rank == 0)
				std::printf("mpi_check: ping-pong %8zu B: %9.1f us one way, %7.2f MB/s\n", len,
					    us, static_cast<double>(len) / us);
		}
	}
	MPI_Barrier(MPI_COMM_WORLD);

	// Allreduce: the sum of every rank's vector.
	constexpr int kN = 100000;
	std::vector<long> mine(kN), sum(kN);
	for (int i = 0; i < kN; i++)
		mine[i] = static_cast<long>(rank + 1) * i;
	MPI_Allreduce(mine.data(), sum.data(), kN, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	long ranks_sum = static_cast<long>(size) * (size + 1) / 2;
	for (int i = 0; i < kN; i++)
		if (sum[i] != ranks_sum * i) {
			check(false, "allreduce: wrong sum", rank);
			break;
		}

	// Alltoall: block j of rank r goes to rank j and says (r, j).
	constexpr int kBlock = 5000;
	std::vector<int> send(static_cast<std::size_t>(kBlock) * size),
		recv(static_cast<std::size_t>(kBlock) * size);
	for (int j = 0; j < size; j++)
		for (int k = 0; k < kBlock; k++)
			send[static_cast<std::size_t>(j) * kBlock + k] = rank * 1000000 + j * 10000 + k % 10000;
	MPI_Alltoall(send.data(), kBlock, MPI_INT, recv.data(), kBlock, MPI_INT, MPI_COMM_WORLD);
	for (int r = 0; r < size; r++)
		for (int k = 0; k < kBlock; k++)
			if (recv[static_cast<std::size_t>(r) * kBlock + k] != r * 1000000 + rank * 10000 + k % 10000) {
				check(false, "alltoall: wrong block", rank);
				r = size;
				break;
			}

	// Broadcast of 1 MiB from the last rank.
	std::vector<std::uint8_t> b(1 << 20);
	if (rank == size - 1)
		for (std::size_t i = 0; i < b.size(); i++)
			b[i] = byte_of(i, 99);
	MPI_Bcast(b.data(), static_cast<int>(b.size()), MPI_BYTE, size - 1, MPI_COMM_WORLD);
	for (std::size_t i = 0; i < b.size(); i++)
		if (b[i] != byte_of(i, 99)) {
			check(false, "bcast: payload differs", rank);
			break;
		}

	// One-sided: a window of kWin ints per rank.  Each rank puts a block
	// into its right neighbour's window, reads its left neighbour's
	// initial block, and adds to a counter at rank 0 (fence epochs); then
	// a 1 MiB put (a message too large to go eagerly).
	constexpr int kWin = 1 << 18;
	std::vector<int> win_mem(kWin);
	for (int i = 0; i < kWin; i++)
		win_mem[i] = rank * 100000 + i % 1000;
	MPI_Win win;
	if (MPI_Win_create(win_mem.data(), static_cast<MPI_Aint>(kWin * sizeof(int)), sizeof(int),
			   MPI_INFO_NULL, MPI_COMM_WORLD, &win) != MPI_SUCCESS) {
		check(false, "MPI_Win_create failed", rank);
	} else {
		const int right = (rank + 1) % size, left = (rank + size - 1) % size;
		constexpr int kBlk = 1000;
		std::vector<int> put(kBlk), got(kBlk, -1);
		for (int k = 0; k < kBlk; k++)
			put[k] = -(rank * 100000 + k);
		int one = 1;
		MPI_Win_fence(0, win);
		// The left neighbour's block at [0, kBlk) before anyone writes it.
		MPI_Get(got.data(), kBlk, MPI_INT, left, 0, kBlk, MPI_INT, win);
		MPI_Win_fence(0, win);
		MPI_Put(put.data(), kBlk, MPI_INT, right, kBlk, kBlk, MPI_INT, win);
		MPI_Accumulate(&one, 1, MPI_INT, 0, kWin - 1, 1, MPI_INT, MPI_SUM, win);
		MPI_Win_fence(0, win);
		for (int k = 0; k < kBlk; k++)
			if (got[k] != left * 100000 + k % 1000) {
				check(false, "MPI_Get: wrong value", rank);
				break;
			}
		for (int k = 0; k < kBlk; k++)
			if (win_mem[kBlk + k] != -(left * 100000 + k)) {
				check(false, "MPI_Put: the window holds other values", rank);
				break;
			}
		if (rank == 0)
			check(win_mem[kWin - 1] == (kWin - 1) % 1000 + size, "MPI_Accumulate: wrong sum", rank);
		// A large put: the whole window but its counter, from the left.
		const int big = kWin - 1 - 2 * kBlk;
		std::vector<int> bigbuf(big);
		for (int k = 0; k < big; k++)
			bigbuf[k] = static_cast<int>(rank ^ (k * 2654435761u));
		MPI_Put(bigbuf.data(), big, MPI_INT, right, 2 * kBlk, big, MPI_INT, win);
		MPI_Win_fence(0, win);
		for (int k = 0; k < big; k++)
			if (win_mem[2 * kBlk + k] != static_cast<int>(left ^ (k * 2654435761u))) {
				check(false, "MPI_Put of 1 MiB: the window holds other values", rank);
				break;
			}
		MPI_Win_free(&win);
		if (rank == 0)
			std::printf("mpi_check: one-sided window: get, put, accumulate, 1 MiB put checked\n");
	}

	int all_failures = 0;
	MPI_Allreduce(&failures, &all_failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		std::printf("mpi_check: %d ranks: %s\n", size, all_failures ? "FAILED" : "ok");
	MPI_Finalize();
	return all_failures ? 1 : 0;
}
