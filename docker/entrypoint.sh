#!/bin/bash
# The image's entrypoint. Spark on Kubernetes starts its pods with the first argument `driver`
# or `executor` and the rest in environment variables (SPARK_DRIVER_URL, SPARK_EXECUTOR_ID, ...),
# the contract of Spark's own images; this does what their entrypoint does, for pyspark's jars.
# Any other arguments go to the das command line (`docker run IMAGE run CONFIG ...`).
set -euo pipefail

# Hadoop's login looks the uid up; Kubernetes may run the image under a uid that has no passwd
# entry (OpenShift), so give it one through nss_wrapper.
fake_passwd_entry() {
  getent passwd "$(id -u)" > /dev/null && return 0
  local wrapper
  for wrapper in /usr/lib/*/libnss_wrapper.so /usr/lib/libnss_wrapper.so; do
    [ -s "$wrapper" ] || continue
    NSS_WRAPPER_PASSWD="$(mktemp)"
    NSS_WRAPPER_GROUP="$(mktemp)"
    printf 'das:x:%s:%s:%s:/opt/das/work:/bin/false\n' "$(id -u)" "$(id -g)" \
      "${SPARK_USER_NAME:-anonymous uid}" > "$NSS_WRAPPER_PASSWD"
    printf 'das:x:%s:\n' "$(id -g)" > "$NSS_WRAPPER_GROUP"
    export LD_PRELOAD="$wrapper" NSS_WRAPPER_PASSWD NSS_WRAPPER_GROUP
    return 0
  done
}

# The executor's class path, in the order Spark's entrypoint builds it: configuration
# directories first, then the jars, the extra class path and the working directory.
executor_classpath() {
  local cp="${SPARK_CLASSPATH:-}:${SPARK_HOME}/jars/*"
  [ -n "${SPARK_EXTRA_CLASSPATH:-}" ] && cp="$cp:$SPARK_EXTRA_CLASSPATH"
  [ -n "${HADOOP_CONF_DIR:-}" ] && cp="$HADOOP_CONF_DIR:$cp"
  cp="${SPARK_CONF_DIR:-$SPARK_HOME/conf}:$cp"
  printf '%s' "$cp:$PWD:${SPARK_DIST_CLASSPATH:-}"
}

case "${1:-}" in
  driver)
    shift
    fake_passwd_entry
    # The driver pod runs the application in client mode: spark-submit already made the pod.
    exec /usr/bin/tini -s -- "$SPARK_HOME/bin/spark-submit" \
      --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS:?set by Spark in the driver pod}" \
      --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=$SPARK_DRIVER_BIND_ADDRESS" \
      --deploy-mode client "$@"
    ;;
  executor)
    shift
    fake_passwd_entry
    # Spark passes the executor's JVM options as SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ...
    java_opts=()
    i=0
    while var="SPARK_JAVA_OPT_$i" && [ -n "${!var+set}" ]; do
      java_opts+=("${!var}")
      i=$((i + 1))
    done
    exec /usr/bin/tini -s -- "$JAVA_HOME/bin/java" "${java_opts[@]}" \
      -Xms"${SPARK_EXECUTOR_MEMORY:?set by Spark in executor pods}" -Xmx"$SPARK_EXECUTOR_MEMORY" \
      -cp "$(executor_classpath)" \
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
      --driver-url "$SPARK_DRIVER_URL" \
      --executor-id "$SPARK_EXECUTOR_ID" \
      --cores "$SPARK_EXECUTOR_CORES" \
      --app-id "$SPARK_APPLICATION_ID" \
      --hostname "$SPARK_EXECUTOR_POD_IP" \
      --resourceProfileId "$SPARK_RESOURCE_PROFILE_ID" \
      --podName "$SPARK_EXECUTOR_POD_NAME"
    ;;
  *)
    fake_passwd_entry
    exec /usr/bin/tini -s -- das "$@"
    ;;
esac
