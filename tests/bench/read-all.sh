#!/usr/bin/env bash
# Benchmark (not a test): read every file at the tip of a corpus tree.
#   revfs cat -r tip -o OUT/%p .   against   hg archive -r tip OUT      (materialize the tree)
#   revfs cat -r tip . >/dev/null  against   hg cat -r tip . >/dev/null (stream every file)
#   and git archive of the same tree when the corpus has its .git twin.
# Output trees go to /dev/shm so that the disk does not dominate.
# Usage: tests/bench/read-all.sh [CORPUS_DIR]   (default: builds ../shared/corpus linux into /work/bench/linux)
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
corpus=${1:-/work/bench/linux}
shared=$(cd "$here/../shared/corpus" && pwd)
bash "$here/tests/bench/install-deps.sh"
[ -f "$corpus/.corpus-done" ] || GIT=1 "$shared/make-corpus.sh" linux "$corpus"
(cd "$here" && cargo build --release --locked -q)
revfs=$here/target/release/revfs
out=/dev/shm/revfs-bench-out
export HGPLAIN=1 HGRCPATH=
cd "$corpus"
echo "corpus: $corpus, $(hg files -r tip | wc -l) files at tip, $(revfs_v=$("$revfs" --version); echo "$revfs_v")"
runs=${RUNS:-5}
cmds=(
  -n "revfs cat -o (materialize)" "$revfs cat -r tip -o $out/%p ."
  -n "hg archive (materialize)" "hg archive -r tip $out"
)
[ -d "$corpus.git" ] && cmds+=(-n "git archive | tar -x (materialize)" "mkdir -p $out && git --git-dir $corpus.git archive HEAD | tar -x -C $out")
hyperfine -w 1 -r "$runs" --prepare "rm -rf $out" "${cmds[@]}" --export-json /tmp/revfs-bench-materialize.json
hyperfine -w 1 -r "$runs" \
  -n "revfs cat (stream)" "$revfs cat -r tip . > /dev/null" \
  -n "hg cat (stream)" "hg cat -r tip . > /dev/null" \
  --export-json /tmp/revfs-bench-stream.json
rm -rf "$out"
for c in "$revfs cat -r tip . " "hg cat -r tip . "; do
  /usr/bin/time -f "peak RSS %M KB: $c" sh -c "$c > /dev/null"
done
python3 - <<'PY'
import json
for f in ("/tmp/revfs-bench-materialize.json", "/tmp/revfs-bench-stream.json"):
    res = json.load(open(f))["results"]
    base = res[0]["median"]
    print("| command | median [s] | min [s] | max [s] | ratio to revfs |")
    print("|---|---:|---:|---:|---:|")
    for r in res:
        print("| `%s` | %.3f | %.3f | %.3f | %.2fx |" % (r["command"], r["median"], r["min"], r["max"], r["median"] / base))
    print()
PY
