#!/usr/bin/python3
"""Checks deploy/systemd/jitd.service and jitd.sysusers.

  check_systemd.py verify      systemd-analyze verify of the unit, its ExecStart
                               pointed at the built jitd; any word about the unit fails
  check_systemd.py security    systemd-analyze security --offline: exposure at most 2.0
  check_systemd.py consistency the unit against `jitd --help`, the sysusers file
                               (applied with systemd-sysusers --root) and the daemon's
                               drain deadline; the hardening the deployment relies on

Common arguments: --unit FILE --sysusers FILE --jitd BINARY --work DIR.
"""

import argparse
import os
import re
import shlex
import shutil
import subprocess

import deploy_checks

# systemd-analyze security's overall exposure is 0.0 (best) to 10.0; the
# unit as shipped scores 1.5 ("OK"); 2.0 lets a reasoned change through and
# stops a lost hardening line.
MAX_EXPOSURE_TENTHS = 20


def parse_unit(path):
    """{section: [(key, value)]}, continuation lines joined."""
    sections = {}
    current = None
    pending = ""
    with open(path) as f:
        for raw in f:
            line = raw.rstrip("\n")
            if pending:
                line = pending + " " + line.strip()
                pending = ""
            if line.endswith("\\"):
                pending = line[:-1].rstrip()
                continue
            stripped = line.strip()
            if not stripped or stripped[0] in "#;":
                continue
            if stripped.startswith("[") and stripped.endswith("]"):
                current = stripped[1:-1]
                sections.setdefault(current, [])
                continue
            key, _, value = stripped.partition("=")
            sections.setdefault(current, []).append((key.strip(), value.strip()))
    return sections


def values(unit, section, key):
    return [v for k, v in unit.get(section, []) if k == key]


def value(unit, section, key):
    found = values(unit, section, key)
    return found[-1] if found else None


def exec_argv(line):
    """ExecStart= without its prefixes (-, @, :, +, !)."""
    return shlex.split(line.lstrip("-@:+!"))


def rewritten_unit(args):
    """A copy of the unit whose ExecStart runs the built jitd (verify checks
    that the executable exists), in the work directory."""
    os.makedirs(args.work, exist_ok=True)
    with open(args.unit) as f:
        text = f.read()
    unit = parse_unit(args.unit)
    executable = exec_argv(value(unit, "Service", "ExecStart"))[0]
    path = os.path.join(args.work, os.path.basename(args.unit))
    with open(path, "w") as f:
        f.write(text.replace(executable, args.jitd))
    return path, text


def analyze_verify(path):
    result = subprocess.run(["systemd-analyze", "verify", path], capture_output=True, text=True,
                            cwd=os.path.dirname(path), timeout=120)
    return result.returncode, (result.stdout + result.stderr).strip()


def verify(args, findings):
    path, text = rewritten_unit(args)
    code, output = analyze_verify(path)
    name = os.path.basename(path)
    about_unit = [line for line in output.splitlines() if name in line or path in line]
    print(f"$ systemd-analyze verify {path}\n{output}" if output else f"$ systemd-analyze verify {path}: silent")
    findings.check(code == 0, f"systemd-analyze verify exited {code}:\n{output}")
    findings.check(not about_unit, "systemd-analyze verify has something to say about the unit:\n" +
                   "\n".join(about_unit))
    # The check itself: a unit with a mistake in it must be reported, or a
    # silent systemd-analyze would pass anything.
    broken = os.path.join(args.work, "broken-" + name)
    with open(broken, "w") as f:
        f.write(text.replace(exec_argv(value(parse_unit(args.unit), "Service", "ExecStart"))[0], args.jitd)
                .replace("[Service]\n", "[Service]\nNoSuchDirective=yes\n", 1))
    _, broken_output = analyze_verify(broken)
    findings.check("NoSuchDirective" in broken_output,
                   "systemd-analyze verify did not report an unknown directive in a broken copy: "
                   "it cannot be relied on here")


def security(args, findings):
    path, _ = rewritten_unit(args)
    result = subprocess.run(["systemd-analyze", "security", "--offline=yes", "--no-pager",
                             f"--threshold={MAX_EXPOSURE_TENTHS}", path],
                            capture_output=True, text=True, cwd=args.work, timeout=120)
    overall = [line for line in result.stdout.splitlines() if "Overall exposure level" in line]
    print(overall[0] if overall else result.stdout + result.stderr)
    findings.check(overall, "systemd-analyze security printed no overall exposure level")
    findings.check(result.returncode == 0,
                   f"exposure above {MAX_EXPOSURE_TENTHS / 10}: {overall[0] if overall else result.stderr}")


def parse_sysusers(path):
    users, groups, members = set(), set(), set()
    with open(path) as f:
        for line in f:
            fields = shlex.split(line, comments=True)
            if not fields:
                continue
            if fields[0] == "u":
                users.add(fields[1])
                groups.add(fields[1])
            elif fields[0] == "g":
                groups.add(fields[1])
            elif fields[0] == "m":
                members.add((fields[1], fields[2]))
    return users, groups, members


def consistency(args, findings):
    unit = parse_unit(args.unit)
    service = dict(unit.get("Service", []))
    argv = exec_argv(value(unit, "Service", "ExecStart"))
    known, _ = deploy_checks.help_flags(args.jitd)
    for flag in deploy_checks.flags_in(argv[1:]):
        findings.check(flag in known, f"ExecStart uses {flag}, which `jitd --help` does not list")

    # Type: the daemon does not speak sd_notify.
    findings.check(service.get("Type") in ("simple", "exec"), f"Type={service.get('Type')}: want simple or exec")
    findings.check(service.get("Restart") == "on-failure", "Restart=on-failure missing")
    findings.check(re.fullmatch(r"/bin/kill -HUP \$MAINPID", service.get("ExecReload", "")) is not None,
                   "ExecReload must send SIGHUP to $MAINPID (it re-reads the kernels)")
    findings.check(service.get("KillMode") == "mixed",
                   "KillMode=mixed: SIGTERM to the daemon only, which drains and stops its own workers")
    stop = re.fullmatch(r"(\d+)s?", service.get("TimeoutStopSec", ""))
    drain = deploy_checks.drain_deadline_seconds()
    findings.check(stop is not None and int(stop.group(1)) > drain,
                   f"TimeoutStopSec={service.get('TimeoutStopSec')} must exceed the {drain} s drain")
    findings.check(service.get("LimitNOFILE", "").isdigit(), "LimitNOFILE missing")

    # Directories: the flags point into the directories systemd makes.
    listen = deploy_checks.flag_value(argv, "--listen") or ""
    findings.check(listen.startswith("unix:/run/"), f"--listen {listen}: want unix:/run/DIR/jitd.sock")
    socket_dir = os.path.dirname(listen[len("unix:"):])
    findings.check(service.get("RuntimeDirectory") == os.path.relpath(socket_dir, "/run"),
                   f"RuntimeDirectory={service.get('RuntimeDirectory')} is not the socket's directory {socket_dir}")
    cache_dir = deploy_checks.flag_value(argv, "--cache-dir") or ""
    findings.check(service.get("CacheDirectory") == os.path.relpath(cache_dir, "/var/cache"),
                   f"CacheDirectory={service.get('CacheDirectory')} is not --cache-dir {cache_dir}")
    config = deploy_checks.flag_value(argv, "--config") or ""
    findings.check(config.startswith("/etc/") and service.get("ConfigurationDirectory") ==
                   os.path.relpath(os.path.dirname(config), "/etc"),
                   f"--config {config} is not in ConfigurationDirectory={service.get('ConfigurationDirectory')}")

    # Users: the unit's user and the socket's group exist once the sysusers
    # file is applied, and the daemon is a member of that group (it gives
    # the socket to it).
    users, groups, members = parse_sysusers(args.sysusers)
    user = service.get("User")
    group = deploy_checks.flag_value(argv, "--socket-group")
    findings.check(user in users, f"User={user} is not made by {args.sysusers}")
    findings.check(group in groups, f"--socket-group {group} is not made by {args.sysusers}")
    findings.check(group in service.get("SupplementaryGroups", "").split() or (user, group) in members,
                   f"{user} is not a member of {group}: it could not give the socket to that group")
    root = os.path.join(args.work, "sysusers-root")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(os.path.join(root, "etc"))
    applied = subprocess.run(["systemd-sysusers", f"--root={root}", args.sysusers], capture_output=True, text=True,
                             timeout=60)
    findings.check(applied.returncode == 0, f"systemd-sysusers refused {args.sysusers}: {applied.stderr}")
    if applied.returncode == 0:
        with open(os.path.join(root, "etc", "passwd")) as f:
            findings.check(any(line.startswith(user + ":") for line in f), f"systemd-sysusers made no user {user}")
        with open(os.path.join(root, "etc", "group")) as f:
            entry = [line.strip() for line in f if line.startswith(f"{group}:")]
        findings.check(entry and user in entry[0].split(":")[3].split(","),
                       f"systemd-sysusers: group {group} does not list {user}: {entry}")

    # The hardening the deployment documents.
    for key, want in [("NoNewPrivileges", "yes"), ("ProtectSystem", "strict"), ("ProtectHome", "yes"),
                      ("PrivateTmp", "yes"), ("PrivateDevices", "yes"), ("ProtectKernelTunables", "yes"),
                      ("ProtectKernelModules", "yes"), ("ProtectKernelLogs", "yes"),
                      ("ProtectControlGroups", "yes"), ("LockPersonality", "yes"), ("RestrictRealtime", "yes"),
                      ("CapabilityBoundingSet", ""), ("SystemCallFilter", "@system-service")]:
        findings.check(service.get(key) == want, f"{key}={service.get(key)}: want {key}={want}")
    findings.check(set(service.get("RestrictAddressFamilies", "").split()) == {"AF_UNIX", "AF_INET", "AF_INET6"},
                   "RestrictAddressFamilies: want AF_UNIX AF_INET AF_INET6")
    findings.check(re.fullmatch(r"0[0-7]{3}", service.get("UMask", "")) is not None, "UMask missing")
    # Fork/exec of the compile workers (the daemon's own binary) must stay
    # possible: no filter may take away @process or execve.
    for line in values(unit, "Service", "SystemCallFilter"):
        denied = line.startswith("~")
        findings.check(not (denied and re.search(r"@process|execve|clone|fork", line)),
                       f"SystemCallFilter={line} would stop the compile workers from starting")
    for key in ("NoExecPaths", "InaccessiblePaths"):
        for line in values(unit, "Service", key):
            findings.check(not any(argv[0].startswith(p.lstrip("-")) for p in line.split()),
                           f"{key}={line} covers the daemon's own binary, which the workers run")
    findings.check(service.get("PrivateUsers") not in ("yes", "true"),
                   "PrivateUsers=yes would unmap the socket group")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["verify", "security", "consistency"])
    parser.add_argument("--unit", required=True)
    parser.add_argument("--sysusers", required=True)
    parser.add_argument("--jitd", required=True)
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    for name in ("unit", "sysusers", "jitd", "work"):
        setattr(args, name, os.path.abspath(getattr(args, name)))
    findings = deploy_checks.Findings(f"{os.path.basename(args.unit)} ({args.mode})")
    {"verify": verify, "security": security, "consistency": consistency}[args.mode](args, findings)
    findings.finish()


if __name__ == "__main__":
    main()
