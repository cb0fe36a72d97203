# Shared by the two-guest benchmark scripts (ab-pair.sh, loss-trace.sh,
# pingpong-cost.sh, profile-pair.sh): the folder both nodes meet in.
# Node 0 empties it and names this run in it; node 1 waits for that name
# (ME_RUN, scripts/vm: a folder of its own per invocation).  Waiting only
# for the folder to exist let node 1, booted first, write into the folder
# an earlier run left, which node 0 then emptied: node 0 waited 120 s for
# a file node 1 had written, and the run failed (2026-12-06).

# pair_dir DIR: up to 60 s for node 1; fails if node 0 never got there.
pair_dir() {
	local d=$1 run=${ME_RUN:?run under scripts/vm} got i fd

	if [ "${ME_NODE:?run under scripts/vm}" -eq 0 ]; then
		rm -rf "$d"
		mkdir -p "$d"
		echo "$run" >"$d/run"
		return 0
	fi
	exec {fd}<> <(:)
	for ((i = 0; i < 600; i++)); do
		got=
		read -r got 2>/dev/null <"$d/run" || :
		[ "$got" = "$run" ] && break
		read -rt 0.1 -u "$fd" || :
	done
	exec {fd}<&-
	[ "$got" = "$run" ] && return 0
	echo "$(basename "$0"): node 0 did not prepare $d within 60 s" >&2
	return 1
}
