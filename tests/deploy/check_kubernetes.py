#!/usr/bin/python3
"""Checks deploy/kubernetes/*.yaml: every document parses, and the pieces agree
with each other, with the image (deploy/container/Dockerfile) and with the
binaries they run.

  check_kubernetes.py --dir deploy/kubernetes --jitd BINARY --jitctl BINARY

- the DaemonSet runs on GPU nodes, its args use only flags `jitd --help` lists,
  its probes are `jitctl ... health` against the socket it listens on, with
  flags `jitctl --help` lists; it runs as non-root, read-only root, no
  capabilities, with resources, and a grace period longer than the drain;
- its metrics port is a containerPort and the prometheus.io annotations say so;
- its config file comes from a ConfigMap whose TOML parses and whose keys are
  documented in deploy/jitd.toml;
- the example inference pod mounts the same host directory at the same path,
  names the same socket in JITD_ENDPOINT and joins the socket's group, whose
  GID is the image's;
- --remote names the Redis Service of redis.yaml, whose Redis is an LRU cache
  without persistence, within its memory limit, reachable by jitd pods.
"""

import argparse
import glob
import os
import re
import tomllib

import yaml

import deploy_checks

NAMESPACE = "jitd"
SIZE_UNITS = {"": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "kb": 1024, "mb": 1024**2, "gb": 1024**3,
              "ki": 1024, "mi": 1024**2, "gi": 1024**3}


def load(directory):
    documents = []
    for path in sorted(glob.glob(os.path.join(directory, "*.yaml"))):
        with open(path) as f:
            for document in yaml.safe_load_all(f):
                if document is not None:
                    documents.append((os.path.basename(path), document))
    return documents


def find(documents, kind, name=None):
    return [d for _, d in documents if d.get("kind") == kind and (name is None or d["metadata"]["name"] == name)]


def bytes_of(text):
    match = re.fullmatch(r"(\d+)\s*([a-zA-Z]*)", str(text).strip())
    if not match or match.group(2).lower() not in SIZE_UNITS:
        return None
    return int(match.group(1)) * SIZE_UNITS[match.group(2).lower()]


def image_groups(dockerfile):
    """{group name: GID} from the Dockerfile's `groupadd ... --gid N NAME`."""
    with open(dockerfile) as f:
        text = f.read()
    return {m.group(2): int(m.group(1)) for m in re.finditer(r"groupadd\s+(?:--system\s+)?--gid\s+(\d+)\s+([\w-]+)",
                                                              text)}


def mounts_by_path(container):
    return {m["mountPath"]: m for m in container.get("volumeMounts", [])}


def volume(pod_spec, name):
    for v in pod_spec.get("volumes", []):
        if v["name"] == name:
            return v
    return None


def check_documents(documents, findings):
    for source, d in documents:
        where = f"{source}: {d.get('kind')} {d.get('metadata', {}).get('name')}"
        findings.check(d.get("apiVersion") and d.get("kind") and d.get("metadata", {}).get("name"),
                       f"{where}: needs apiVersion, kind and metadata.name")
        if d.get("kind") != "Namespace":
            findings.check(d.get("metadata", {}).get("namespace") == NAMESPACE,
                           f"{where}: not in the {NAMESPACE} namespace")
    findings.check(find(documents, "Namespace", NAMESPACE), f"no Namespace {NAMESPACE}")


def check_security(where, pod_spec, container, findings, read_only_root=True):
    pod_context = pod_spec.get("securityContext", {})
    context = container.get("securityContext", {})
    non_root = context.get("runAsNonRoot", pod_context.get("runAsNonRoot"))
    findings.check(non_root is True, f"{where}: runAsNonRoot is not true")
    findings.check(context.get("allowPrivilegeEscalation") is False, f"{where}: allowPrivilegeEscalation not false")
    findings.check("ALL" in context.get("capabilities", {}).get("drop", []), f"{where}: capabilities not drop ALL")
    findings.check(not context.get("capabilities", {}).get("add"), f"{where}: adds capabilities")
    if read_only_root:
        findings.check(context.get("readOnlyRootFilesystem") is True, f"{where}: readOnlyRootFilesystem not true")


def check_probe(where, probe, endpoint, jitctl_flags, findings):
    command = probe.get("exec", {}).get("command", []) if probe else []
    findings.check(command[:1] == ["jitctl"] and command[-1:] == ["health"],
                   f"{where}: want exec: jitctl ... health, have {command}")
    for flag in deploy_checks.flags_in(command[1:]):
        findings.check(flag in jitctl_flags, f"{where}: {flag} is not in `jitctl --help`")
    findings.check(deploy_checks.flag_value(command, "--endpoint") == endpoint,
                   f"{where}: --endpoint {deploy_checks.flag_value(command, '--endpoint')} is not {endpoint}")
    findings.check(probe and probe.get("timeoutSeconds", 1) >= 3,
                   f"{where}: timeoutSeconds under 3 s (jitctl connects, then checks with a 2 s deadline)")


def check_daemonset(documents, args, findings):
    sets = find(documents, "DaemonSet", "jitd")
    if not findings.check(len(sets) == 1, "want one DaemonSet jitd"):
        return None
    ds = sets[0]
    template = ds["spec"]["template"]
    spec = template["spec"]
    labels = template["metadata"].get("labels", {})
    findings.check(all(labels.get(k) == v for k, v in ds["spec"]["selector"]["matchLabels"].items()),
                   "DaemonSet: selector does not match the template's labels")
    findings.check("nvidia.com/gpu.present" in spec.get("nodeSelector", {}) or "affinity" in spec,
                   "DaemonSet: no nodeSelector/affinity for GPU nodes")
    findings.check(any(t.get("key") == "nvidia.com/gpu" for t in spec.get("tolerations", [])),
                   "DaemonSet: no toleration of the nvidia.com/gpu taint")
    drain = deploy_checks.drain_deadline_seconds()
    findings.check(spec.get("terminationGracePeriodSeconds", 30) > drain,
                   f"DaemonSet: terminationGracePeriodSeconds must exceed the {drain} s drain")

    containers = {c["name"]: c for c in spec["containers"]}
    if not findings.check("jitd" in containers, "DaemonSet: no container jitd"):
        return None
    jitd = containers["jitd"]
    argv = jitd.get("args", [])
    jitd_flags, _ = deploy_checks.help_flags(args.jitd)
    for flag in deploy_checks.flags_in(argv):
        findings.check(flag in jitd_flags, f"DaemonSet args: {flag} is not in `jitd --help`")

    listen = deploy_checks.flag_value(argv, "--listen") or ""
    findings.check(listen.startswith("unix:/"), f"DaemonSet: --listen {listen}: want unix:/DIR/jitd.sock")
    socket_dir = os.path.dirname(listen[len("unix:"):])
    mounts = mounts_by_path(jitd)
    socket_mount = mounts.get(socket_dir)
    socket_volume = volume(spec, socket_mount["name"]) if socket_mount else None
    findings.check(socket_volume and "hostPath" in socket_volume,
                   f"DaemonSet: the socket directory {socket_dir} is not a hostPath volume")

    cache_dir = deploy_checks.flag_value(argv, "--cache-dir")
    findings.check(cache_dir in mounts, f"DaemonSet: --cache-dir {cache_dir} is not a volume")
    findings.check("/tmp" in mounts, "DaemonSet: no writable /tmp (compile workers' scratch) on a read-only root")

    config = deploy_checks.flag_value(argv, "--config")
    config_mount = mounts.get(os.path.dirname(config or ""))
    config_volume = volume(spec, config_mount["name"]) if config_mount else None
    if findings.check(config_volume and "configMap" in config_volume,
                      f"DaemonSet: --config {config} is not in a ConfigMap volume"):
        maps = find(documents, "ConfigMap", config_volume["configMap"]["name"])
        text = maps[0]["data"].get(os.path.basename(config)) if maps else None
        if findings.check(text is not None, f"ConfigMap {config_volume['configMap']['name']} has no "
                                            f"{os.path.basename(config)}"):
            try:
                keys = set(tomllib.loads(text))
            except tomllib.TOMLDecodeError as error:
                findings.check(False, f"ConfigMap's {os.path.basename(config)} is not TOML: {error}")
                keys = set()
            undocumented = keys - deploy_checks.documented_config_keys()
            findings.check(not undocumented, f"ConfigMap's jitd.toml sets keys deploy/jitd.toml does not "
                                             f"document (so the daemon may refuse them): {sorted(undocumented)}")

    password_file = deploy_checks.flag_value(argv, "--remote-password-file")
    if password_file:
        mount = mounts.get(os.path.dirname(password_file))
        source = volume(spec, mount["name"]) if mount else None
        findings.check(source and "secret" in source,
                       f"DaemonSet: --remote-password-file {password_file} is not in a Secret volume")

    # Probes.
    jitctl_flags, jitctl_help = deploy_checks.help_flags(args.jitctl)
    findings.check(re.search(r"^\s+health\s", jitctl_help, re.M), "`jitctl --help` lists no health verb")
    for probe in ("readinessProbe", "livenessProbe"):
        findings.check(probe in jitd, f"DaemonSet: no {probe}")
        check_probe(f"DaemonSet {probe}", jitd.get(probe), listen, jitctl_flags, findings)
    if "startupProbe" in jitd:
        check_probe("DaemonSet startupProbe", jitd["startupProbe"], listen, jitctl_flags, findings)

    # Metrics.
    metrics = deploy_checks.flag_value(argv, "--metrics-listen") or ""
    port = metrics.rpartition(":")[2]
    findings.check(port.isdigit(), f"DaemonSet: --metrics-listen {metrics}: want HOST:PORT")
    findings.check(any(str(p.get("containerPort")) == port for p in jitd.get("ports", [])),
                   f"DaemonSet: metrics port {port} is not a containerPort")
    annotations = template["metadata"].get("annotations", {})
    findings.check(annotations.get("prometheus.io/scrape") == "true", "DaemonSet: prometheus.io/scrape is not \"true\"")
    findings.check(annotations.get("prometheus.io/port") == port, f"DaemonSet: prometheus.io/port is not \"{port}\"")
    findings.check(annotations.get("prometheus.io/path") == "/metrics", "DaemonSet: prometheus.io/path is not /metrics")

    # Who it runs as, what it may use.
    check_security("DaemonSet container jitd", spec, jitd, findings)
    for init in spec.get("initContainers", []):
        context = init.get("securityContext", {})
        findings.check("ALL" in context.get("capabilities", {}).get("drop", []),
                       f"DaemonSet init container {init['name']}: capabilities not drop ALL")
        findings.check(set(context.get("capabilities", {}).get("add", [])) <= {"CHOWN"},
                       f"DaemonSet init container {init['name']}: capabilities beyond CHOWN")
    resources = jitd.get("resources", {})
    findings.check(resources.get("requests", {}).get("cpu") and resources.get("requests", {}).get("memory"),
                   "DaemonSet: no cpu/memory requests")
    findings.check(resources.get("limits", {}).get("memory"), "DaemonSet: no memory limit")
    findings.check("nvidia.com/gpu" not in resources.get("limits", {}), "DaemonSet: jitd takes a GPU; it needs none")

    # The socket's group: the image's GID, which the daemon must hold.
    groups = image_groups(args.dockerfile)
    group = deploy_checks.flag_value(argv, "--socket-group")
    gid = groups.get(group)
    findings.check(gid is not None, f"DaemonSet: --socket-group {group} is not a group the image makes ({groups})")
    findings.check(gid in spec.get("securityContext", {}).get("supplementalGroups", []),
                   f"DaemonSet: not in the socket's group {group} ({gid}): it could not give the socket to it")
    return {"listen": listen, "socket_dir": socket_dir, "host_path": socket_volume["hostPath"]["path"]
            if socket_volume else None, "gid": gid, "argv": argv}


def check_example_pod(documents, daemon, findings):
    pods = find(documents, "Pod")
    if not findings.check(pods, "no example inference Pod"):
        return
    for pod in pods:
        where = f"Pod {pod['metadata']['name']}"
        spec = pod["spec"]
        findings.check(daemon["gid"] in spec.get("securityContext", {}).get("supplementalGroups", []),
                       f"{where}: not in the socket's group ({daemon['gid']}): the 0660 socket would refuse it")
        host_paths = {v["name"]: v["hostPath"]["path"] for v in spec.get("volumes", []) if "hostPath" in v}
        for container in spec["containers"]:
            cwhere = f"{where} container {container['name']}"
            mount = mounts_by_path(container).get(daemon["socket_dir"])
            findings.check(mount is not None, f"{cwhere}: nothing mounted at {daemon['socket_dir']}, "
                                              "where the DaemonSet's socket is")
            findings.check(mount and host_paths.get(mount["name"]) == daemon["host_path"],
                           f"{cwhere}: {daemon['socket_dir']} is not the DaemonSet's hostPath {daemon['host_path']}")
            env = {e["name"]: e.get("value") for e in container.get("env", [])}
            findings.check(env.get("JITD_ENDPOINT") == daemon["listen"],
                           f"{cwhere}: JITD_ENDPOINT={env.get('JITD_ENDPOINT')} is not the daemon's {daemon['listen']}")
            check_security(cwhere, spec, container, findings, read_only_root=False)


def check_redis(documents, daemon, findings):
    remote = deploy_checks.flag_value(daemon["argv"], "--remote")
    if not remote:
        return
    match = re.fullmatch(r"redis://([^/:]+):(\d+)(?:/\d+)?", remote)
    if not findings.check(match, f"--remote {remote}: want redis://HOST:PORT/DB"):
        return
    host, port = match.group(1), int(match.group(2))
    name, _, rest = host.partition(".")
    findings.check(rest in ("", NAMESPACE, f"{NAMESPACE}.svc", f"{NAMESPACE}.svc.cluster.local"),
                   f"--remote host {host} is not a Service of the {NAMESPACE} namespace")
    services = find(documents, "Service", name)
    if not findings.check(services, f"--remote names Service {name}, which redis.yaml does not define"):
        return
    service = services[0]
    findings.check(any(p["port"] == port for p in service["spec"]["ports"]), f"Service {name}: no port {port}")
    deployments = [d for d in find(documents, "Deployment")
                   if all(d["spec"]["template"]["metadata"]["labels"].get(k) == v
                          for k, v in service["spec"]["selector"].items())]
    if not findings.check(len(deployments) == 1, f"Service {name} selects {len(deployments)} Deployments, want 1"):
        return
    spec = deployments[0]["spec"]["template"]["spec"]
    redis = spec["containers"][0]
    config_text = "\n".join(m["data"].get("redis.conf", "") for m in find(documents, "ConfigMap")
                            if "redis.conf" in m.get("data", {}))
    settings = {}
    for line in config_text.splitlines():
        fields = line.split(None, 1)
        if fields and not fields[0].startswith("#"):
            settings[fields[0]] = fields[1].strip() if len(fields) > 1 else ""
    findings.check(settings.get("maxmemory-policy") == "allkeys-lru", "redis.conf: maxmemory-policy is not allkeys-lru")
    maxmemory = bytes_of(settings.get("maxmemory", ""))
    findings.check(maxmemory, "redis.conf: no maxmemory: an LRU cache needs a bound")
    findings.check(settings.get("save") == '""' and settings.get("appendonly") == "no",
                   'redis.conf: persistence on; a cache wants save "" and appendonly no')
    limit = bytes_of(redis.get("resources", {}).get("limits", {}).get("memory", ""))
    findings.check(limit and maxmemory and limit > maxmemory,
                   "Redis: the memory limit must exceed maxmemory, or it is killed before it evicts")
    check_security(f"Deployment {deployments[0]['metadata']['name']}", spec, redis, findings)
    if deploy_checks.flag_value(daemon["argv"], "--remote-password-file"):
        findings.check("--requirepass" in redis.get("args", []) or "requirepass" in settings,
                       "jitd sends a password but Redis requires none")
    policies = [p for p in find(documents, "NetworkPolicy")
                if all(deployments[0]["spec"]["template"]["metadata"]["labels"].get(k) == v
                       for k, v in p["spec"]["podSelector"].get("matchLabels", {}).items())]
    findings.check(policies, "Redis: no NetworkPolicy limits who may write the shared tier")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--jitd", required=True)
    parser.add_argument("--jitctl", required=True)
    parser.add_argument("--dockerfile", default=os.path.join(deploy_checks.REPO, "deploy", "container", "Dockerfile"))
    args = parser.parse_args()
    findings = deploy_checks.Findings("deploy/kubernetes")
    documents = load(args.dir)
    findings.check(len(documents) >= 5, f"only {len(documents)} YAML documents in {args.dir}")
    print(f"{len(documents)} documents: " + ", ".join(f"{s}:{d['kind']}/{d['metadata']['name']}"
                                                      for s, d in documents))
    check_documents(documents, findings)
    daemon = check_daemonset(documents, args, findings)
    if daemon:
        check_example_pod(documents, daemon, findings)
        check_redis(documents, daemon, findings)
    findings.finish()


if __name__ == "__main__":
    main()
