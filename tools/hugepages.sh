#!/usr/bin/env bash
# Best effort: mount hugetlbfs and make sure MIB mebibytes of 2 MiB pages are
# free. Never fails: Tide falls back to --no-huge when pages are short, and
# says so. Usage: hugepages.sh [MIB]   (default 512)
set -u
mib=${1:-512}
need=$(( (mib + 1) / 2 ))
dir=/sys/kernel/mm/hugepages/hugepages-2048kB
if [ ! -d "$dir" ]; then
	echo "hugepages: kernel has no 2 MiB hugepages; Tide will run with --no-huge"
	exit 0
fi
mkdir -p /dev/hugepages 2>/dev/null
mountpoint -q /dev/hugepages || mount -t hugetlbfs nodev /dev/hugepages 2>/dev/null ||
	{ echo "hugepages: cannot mount hugetlbfs; Tide will run with --no-huge"; exit 0; }
free=$(cat "$dir/free_hugepages")
if [ "$free" -lt "$need" ]; then
	nr=$(cat "$dir/nr_hugepages")
	echo $(( nr + need - free )) > "$dir/nr_hugepages" 2>/dev/null || true
	free=$(cat "$dir/free_hugepages")
fi
echo "hugepages: $free free 2 MiB pages (wanted $need)"
exit 0
