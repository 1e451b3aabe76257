#!/usr/bin/env bash
# Ingestion throughput on the shared real data: MIMIC-IV demo (hosp/) and the
# Synthea bulk FHIR notes. Each ingest starts from an empty store.
# Usage: scripts/bench_ingest.sh [path/to/evident]   (default: the release build)
set -euo pipefail
cd "$(dirname "$0")/.."
EVIDENT="${1:-${CARGO_TARGET_DIR:-$HOME/.cache/evident/target}/release/evident}"
DATA="$(cd ../shared/data && pwd)"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
for dataset in mimic-iv-demo synthea/sample-bulk-fhir-datasets-10-patients; do
    hyperfine --runs 3 --prepare "rm -f $TMP/b.db*" \
        "EVIDENT_DB=$TMP/b.db $EVIDENT ingest $DATA/$dataset" --export-json "$TMP/h.json" >/dev/null
    mean=$(python3 -c "import json;r=json.load(open('$TMP/h.json'))['results'][0];print(f\"{r['mean']:.2f} s (sd {r['stddev']:.2f}, min {r['min']:.2f}, max {r['max']:.2f})\")")
    EVIDENT_DB="$TMP/b.db" "$EVIDENT" ingest "$DATA/$dataset" >/dev/null
    counts=$(sqlite3 "$TMP/b.db" "select (select count(*) from patients)||' patients, '||(select count(*) from documents)||' documents, '||(select count(*) from sections)||' sections, '||(select count(*) from sentences)||' sentences, '||(select count(*) from labs)||' labs'")
    echo "$dataset: $mean; $counts"
    rm -f "$TMP"/b.db*
done
