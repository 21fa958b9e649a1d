#!/usr/bin/env bash
# Ensures the Java peer (Apache Spark 3.5 through PyPI `pyspark==3.5.*`, with the Hudi Spark
# bundles from Maven Central) is installed, once per machine, and prints as its last line a JSON
# object: {"python": PY, "pyspark": VERSION, "versions": {HUDI_VERSION: {"bundle": JAR,
# "utilities": JAR or null}, ...}, "missing": [...]}. scripts/spark_peer.py runs with PY.
#
#   pyspark             into $REPO/.venv (the venv of scripts/peer.sh; created if missing)
#   Hudi jars           $REPO/.arbor-test/spark-jars/<version>/ (mvn dependency:copy), for
#                       org.apache.hudi:hudi-spark3.5-bundle_2.12 and
#                       org.apache.hudi:hudi-utilities-slim-bundle_2.12 (HoodieMetadataTableValidator)
#   Lance jars          for 1.2.x, $REPO/.arbor-test/spark-jars/<version>/lance/: the Lance Java SDK
#                       (org.lance:lance-core 4.0.0, lance-spark-3.5_2.12 0.4.0, what Hudi 1.2.0's
#                       pom names) and the Arrow 18.3 jars it is built on, which the bundle leaves
#                       out and a Hudi 1.2 reader of Lance base files needs (spark_peer.py puts them
#                       first on the class path, ahead of Spark's Arrow 12); lance-spark trimmed to
#                       the Arrow conversion Hudi calls (its catalyst overrides break CALL)
#   versions            1.0.2 (table version 8), 1.1.1 and 1.2.0 (the newest 1.1.x and 1.2.x on
#                       Maven Central when this was written); override with
#                       ARBOR_HUDI_VERSIONS="1.0.2 1.1.1 ..."
#
# A jar that cannot be downloaded is named on stderr and left out (its version is listed under
# "missing"; a version without its bundle jar is not in "versions"); the others still install.
# A second run downloads nothing and only prints. Safe to run concurrently (flock).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${REPO}/.venv"
PY="${VENV}/bin/python"
STATE="${REPO}/.arbor-test"
JARS="${STATE}/spark-jars"
VERSIONS="${ARBOR_HUDI_VERSIONS:-1.0.2 1.1.1 1.2.0}"
PYSPARK_SPEC='pyspark==3.5.*'
mkdir -p "${STATE}" "${JARS}"

exec 7>"${STATE}/spark.lock"
if command -v flock >/dev/null 2>&1; then
    flock 7
fi

# 1. pyspark 3.5 in the shared venv. pip runs under peer.lock too, so it never overlaps the pip
#    of scripts/peer.sh in the same venv.
if ! "${PY}" -c 'import pyspark, sys; sys.exit(0 if pyspark.__version__.startswith("3.5.") else 1)' >/dev/null 2>&1; then
    (
        exec 8>"${STATE}/peer.lock"
        if command -v flock >/dev/null 2>&1; then
            flock 8
        fi
        if [[ ! -x "${PY}" ]]; then
            echo "spark.sh: creating ${VENV}" >&2
            python3 -m venv "${VENV}" >&2
        fi
        echo "spark.sh: installing ${PYSPARK_SPEC} into ${VENV} (about 320 MB)" >&2
        "${PY}" -m pip install --quiet "${PYSPARK_SPEC}" >&2
    )
fi
if ! command -v java >/dev/null 2>&1; then
    echo "spark.sh: java is not on PATH; Spark needs a JDK 8/11/17 (apt-get install openjdk-17-jdk-headless)" >&2
    exit 1
fi

# 2. The Hudi jars, each into its own version directory; a finished download is marked by the
#    jar itself (mvn writes it only once complete; a partial copy goes to a temporary directory).
fetch_jar() { # artifactId version -> prints the jar path, or nothing when it cannot be had
    local artifact="$1" version="$2"
    local dir="${JARS}/${version}"
    local jar="${dir}/${artifact}-${version}.jar"
    if [[ -s "${jar}" ]]; then
        echo "${jar}"
        return 0
    fi
    if [[ -e "${dir}/${artifact}-${version}.missing" ]] && [[ -z "${ARBOR_SPARK_RETRY:-}" ]]; then
        return 0
    fi
    if ! command -v mvn >/dev/null 2>&1; then
        echo "spark.sh: mvn is not on PATH; cannot fetch ${artifact}:${version} (apt-get install maven)" >&2
        return 0
    fi
    mkdir -p "${dir}"
    local tmp
    tmp="$(mktemp -d "${dir}/.download.XXXXXX")"
    echo "spark.sh: fetching org.apache.hudi:${artifact}:${version} from Maven Central" >&2
    if mvn -B -q -Dstyle.color=never org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy \
        -Dartifact="org.apache.hudi:${artifact}:${version}:jar" \
        -DoutputDirectory="${tmp}" -Dmdep.overWriteReleases=true >"${tmp}.log" 2>&1 \
        && [[ -s "${tmp}/${artifact}-${version}.jar" ]]; then
        mv "${tmp}/${artifact}-${version}.jar" "${jar}"
        rm -f "${dir}/${artifact}-${version}.missing"
        # the copy in ~/.m2 is not needed again: drop it to keep one copy per machine
        rm -rf "${HOME}/.m2/repository/org/apache/hudi/${artifact}/${version}"
        echo "${jar}"
    else
        local why
        why="$(sed 's/\x1b\[[0-9;]*m//g' "${tmp}.log" | grep -m1 -oE 'Could not (find|transfer) artifact [^ ]*|Unable to [^.]*' || true)"
        echo "spark.sh: cannot download org.apache.hudi:${artifact}:${version} (${why:-see mvn output}); continuing without it (ARBOR_SPARK_RETRY=1 retries)" >&2
        touch "${dir}/${artifact}-${version}.missing"
    fi
    rm -rf "${tmp}" "${tmp}.log"
}

# 3. The Lance jars of a Hudi 1.2 version (see the header): one mvn run over a generated pom that
#    names exactly these artifacts (no transitive ones: Spark has the rest). Marked done by
#    .complete; a failure is named and leaves Lance tables unreadable for Spark only.
LANCE_ARTIFACTS="org.lance:lance-core:4.0.0 org.lance:lance-spark-3.5_2.12:0.4.0 \
org.apache.arrow:arrow-c-data:18.3.0 org.apache.arrow:arrow-vector:18.3.0 \
org.apache.arrow:arrow-format:18.3.0 org.apache.arrow:arrow-memory-core:18.3.0 \
org.apache.arrow:arrow-memory-netty:18.3.0 org.apache.arrow:arrow-memory-netty-buffer-patch:18.3.0 \
com.google.flatbuffers:flatbuffers-java:25.2.10 org.questdb:jar-jni:1.1.1 \
org.lance:lance-namespace-core:0.5.2"
fetch_lance() { # hudi version
    local dir="${JARS}/$1/lance"
    [[ -e "${dir}/.complete" ]] && return 0
    command -v mvn >/dev/null 2>&1 || return 0
    local tmp
    tmp="$(mktemp -d "${JARS}/.lance.XXXXXX")"
    {
        echo '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        echo '<groupId>arbor.test</groupId><artifactId>lance-jars</artifactId><version>1</version><dependencies>'
        for a in ${LANCE_ARTIFACTS}; do
            IFS=: read -r g n v <<<"${a}"
            echo "<dependency><groupId>${g}</groupId><artifactId>${n}</artifactId><version>${v}</version>"
            echo '<exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions></dependency>'
        done
        echo '</dependencies></project>'
    } >"${tmp}/pom.xml"
    echo "spark.sh: fetching the Lance Java SDK and Arrow 18.3 for Hudi $1 (about 170 MB)" >&2
    if (cd "${tmp}" && mvn -B -q -Dstyle.color=never \
        org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
        -DoutputDirectory="${tmp}/out" >"${tmp}/mvn.log" 2>&1) \
        && [[ "$(ls "${tmp}/out" | wc -l)" -eq "$(echo ${LANCE_ARTIFACTS} | wc -w)" ]]; then
        # lance-spark also replaces Spark catalyst classes (its SQL extensions; they break
        # Hudi's CALL procedures): keep what Hudi uses, its Arrow conversion
        # (org/apache/spark/sql/util/Lance*) and org/lance/**.
        python3 - "${tmp}/out/lance-spark-3.5_2.12-0.4.0.jar" <<'PY'
import os, sys, zipfile
src = sys.argv[1]
dst = src + ".tmp"
with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
    for item in zin.infolist():
        n = item.filename
        if n.startswith(("org/lance/", "org/apache/spark/sql/util/", "META-INF/MANIFEST")) or n.endswith("/"):
            if not n.startswith("META-INF/services"):
                zout.writestr(item, zin.read(n))
os.replace(dst, src)
PY
        rm -rf "${dir}"
        mv "${tmp}/out" "${dir}"
        touch "${dir}/.complete"
        rm -rf "${HOME}/.m2/repository/org/lance/lance-core"
    else
        echo "spark.sh: cannot fetch the Lance jars for Hudi $1 (see mvn output); Spark will not read Lance base files" >&2
        sed 's/\x1b\[[0-9;]*m//g' "${tmp}/mvn.log" | tail -5 >&2 || true
    fi
    rm -rf "${tmp}"
}

PYSPARK_VERSION="$("${PY}" -c 'import pyspark; print(pyspark.__version__)')"
ENTRIES=()
MISSING=()
for v in ${VERSIONS}; do
    bundle="$(fetch_jar hudi-spark3.5-bundle_2.12 "${v}")"
    utilities="$(fetch_jar hudi-utilities-slim-bundle_2.12 "${v}")"
    [[ -n "${bundle}" ]] || MISSING+=("hudi-spark3.5-bundle_2.12:${v}")
    [[ -n "${utilities}" ]] || MISSING+=("hudi-utilities-slim-bundle_2.12:${v}")
    if [[ -n "${bundle}" ]]; then
        ENTRIES+=("${v}" "${bundle}" "${utilities}")
        case "${v}" in 1.2.*) fetch_lance "${v}" ;; esac
    fi
done

"${PY}" - "${PY}" "${PYSPARK_VERSION}" "${#MISSING[@]}" "${MISSING[@]}" "${ENTRIES[@]}" <<'EOF'
import json, sys
py, pyspark, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
missing = sys.argv[4:4 + n]
rest = sys.argv[4 + n:]
versions = {}
for i in range(0, len(rest), 3):
    v, bundle, utilities = rest[i:i + 3]
    versions[v] = {"bundle": bundle, "utilities": utilities or None}
print(json.dumps({"python": py, "pyspark": pyspark, "versions": versions, "missing": missing},
                 sort_keys=True))
EOF
