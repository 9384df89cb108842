#!/bin/bash
# Create the FoundationDB database unless one exists: the one-shot "init" service of
# compose.yaml (the official image has bash and fdbcli), and run against a local server
# by tests/integration/test_containers.py.
#
#   FDB_CLUSTER_FILE  the cluster file (default /var/fdb/fdb.cluster, the image's)
#   FDB_INIT_CONFIG   what a new database is (default "single ssd")
#   FDB_INIT_TIMEOUT  seconds to wait for the server (default 120)
#   FDBCLI            the fdbcli program (default: fdbcli on PATH)
#
# It never reconfigures: a database that answers is left as it is, and "configure new"
# is refused by FoundationDB itself where one exists.  Exit status 0 once a database
# exists, 1 if the server did not answer in time.
set -u
cluster_file="${FDB_CLUSTER_FILE:-/var/fdb/fdb.cluster}"
config="${FDB_INIT_CONFIG:-single ssd}"
fdbcli="${FDBCLI:-fdbcli}"
deadline=$(( $(date +%s) + ${FDB_INIT_TIMEOUT:-120} ))
said=""
while [ "$(date +%s)" -lt "$deadline" ]; do
    said=$("$fdbcli" -C "$cluster_file" --exec "status minimal" --timeout 5 2>&1)
    case "$said" in
        *"The database is available"*)
            echo "fdbrecipes init: the database exists; left as it is"
            exit 0 ;;
    esac
    said=$("$fdbcli" -C "$cluster_file" --exec "configure new $config" --timeout 10 2>&1)
    case "$said" in
        *"Database created"*)
            echo "fdbrecipes init: created a new database ($config)"
            exit 0 ;;
        *"already exists"*)
            echo "fdbrecipes init: the database exists; left as it is"
            exit 0 ;;
    esac
    sleep 1  # the server is starting: nothing to wait on but fdbcli's answer
done
echo "fdbrecipes init: no answer from the cluster of $cluster_file in time: $said" >&2
exit 1
