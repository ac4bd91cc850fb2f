#!/usr/bin/python3
"""Checks deploy/container/Dockerfile without a container engine.

  check_dockerfile.py --dockerfile FILE --readme README.md --build-dir BUILD
                      --jitd BINARY --jitctl BINARY --work DIR

- every stage is named; every base image is pinned to a tag (or a digest);
- the build stage runs deploy/install-deps.sh and README's configure and build
  flags (extra flags only from ALLOWED_EXTRA_CONFIGURE), then `cmake --install`;
- the build stage makes a seed bundle (`jitd bundle create --all ... -o FILE`),
  optional (ARG WARM), and checks it there (`jitd bundle verify FILE`);
- every COPY --from source is a path `cmake --install` produces (checked against
  a real `cmake --install BUILD --prefix WORK/prefix`), or the bundle
  `jitd bundle create` writes in that stage (or its directory), or a file a
  command of that stage writes (`cp`'s target, a `>`/`>>` redirection: the
  generated config), or the CUDA toolkit's include tree of that stage;
- the runtime stage mounts the bundle: CMD's --config is a file the build
  stage wrote with a `bundle = ...` line, and each path that line names is
  where a COPY --from puts that stage's bundle;
- the runtime stage installs no compiler, no nvcc and no -dev package, yet every
  shared library `ldd jitd` and `ldd jitctl` need (mapped to Debian packages
  with dpkg -S on this host) comes from a package it installs, their
  dependencies or the base image; NVRTC from cuda-nvrtc-MAJOR-MINOR of the
  toolkit the build stage used;
- the runtime stage runs as a numeric non-root USER that the image creates,
  has a HEALTHCHECK with `jitctl health`, ENTRYPOINT ["jitd"], a CMD whose flags
  `jitd --help` lists, a VOLUME on its --cache-dir, EXPOSE of its metrics port
  and JITD_ENDPOINT naming the socket it listens on.
"""

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import tomllib

import deploy_checks

# An image ships no tests or benchmarks: the only flags beyond README's.
ALLOWED_EXTRA_CONFIGURE = {"-DJITD_BUILD_TESTS=OFF", "-DJITD_BUILD_BENCHMARKS=OFF"}
FORBIDDEN_RUNTIME_PACKAGE = re.compile(
    r"(^|-)dev($|-)|nvcc|^gcc|^g\+\+|^clang|^cpp($|-)|^build-essential$|^cmake$|^make$|^cuda-toolkit|"
    r"^cuda-compiler|^cuda-minimal-build|^cuda-crt")
# Packages of debian:bookworm-slim beyond Priority: required ones.
BASE_ROOTS = ["apt", "dpkg", "base-files", "bash", "coreutils"]


class Stage:
    def __init__(self, image, name):
        self.image = image
        self.name = name
        self.instructions = []  # (keyword, arguments text)

    def all(self, keyword):
        return [text for k, text in self.instructions if k == keyword]


def parse(path):
    """The Dockerfile's stages: continuation lines joined, comments dropped."""
    stages = []
    logical = ""
    with open(path) as f:
        lines = f.read().splitlines()
    for line in lines + [""]:
        stripped = line.strip()
        if stripped.startswith("#"):
            continue  # comments, also inside a continued instruction
        if stripped.endswith("\\"):
            logical += stripped[:-1] + " "
            continue
        logical += stripped
        if logical.strip():
            keyword, _, text = logical.strip().partition(" ")
            keyword = keyword.upper()
            text = text.strip()
            if keyword == "FROM":
                words = text.split()
                name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
                stages.append(Stage(words[0], name))
            elif stages:
                stages[-1].instructions.append((keyword, text))
        logical = ""
    return stages


def exec_form(text):
    """["a", "b"] or shell form, as a list."""
    try:
        value = json.loads(text)
        if isinstance(value, list):
            return value
    except json.JSONDecodeError:
        pass
    return shlex.split(text)


def commands(stage):
    """Each `&&`/`;`-separated command of the stage's RUN lines, as words."""
    result = []
    for run in stage.all("RUN"):
        for part in re.split(r"&&|;|\bthen\b|\bfi\b", run):
            words = shlex.split(part)
            if words:
                result.append(words)
    return result


def option_value(words, *names):
    """The value of the last of `names` in words ("-o FILE", "--output FILE"
    or "--output=FILE"), or None."""
    value = None
    for i, word in enumerate(words):
        for name in names:
            if word == name and i + 1 < len(words):
                value = words[i + 1]
            elif name.startswith("--") and word.startswith(name + "="):
                value = word.split("=", 1)[1]
    return value


def written_files(words):
    """The files a command writes: `cp`'s or `install`'s target, and the
    targets of its > and >> redirections."""
    files = []
    if words[0] in ("cp", "install") and len(words) > 2 and not words[-1].startswith("-"):
        files.append(words[-1])
    for i, word in enumerate(words):
        if word in (">", ">>") and i + 1 < len(words):
            files.append(words[i + 1])
        elif re.fullmatch(r">>?[^>&].*", word):
            files.append(word.lstrip(">"))
    return files


def bundle_lines(words):
    """The bundle paths a `bundle = ...` TOML line among the words names."""
    paths = []
    for word in words:
        if re.match(r"\s*bundle\s*=", word):
            try:
                value = tomllib.loads(word)["bundle"]
            except (tomllib.TOMLDecodeError, KeyError):
                continue
            paths += [value] if isinstance(value, str) else [v for v in value if isinstance(v, str)]
    return paths


def copy_destination(source, destination, sources):
    """Where COPY puts the file `source`: into `destination` when it ends
    with / or when several sources are copied, else at `destination`."""
    if destination.endswith("/") or len(sources) > 1:
        return os.path.join(destination, os.path.basename(source))
    return destination


def apt_installs(stage):
    packages = []
    for words in commands(stage):
        if "apt-get" in words and "install" in words:
            rest = words[words.index("install") + 1:]
            packages += [w for w in rest if not w.startswith("-")]
    return packages


def readme_cmake(readme):
    """README's first command's configure and build arguments."""
    with open(readme) as f:
        for line in f:
            if line.startswith("    ./deploy/install-deps.sh &&"):
                parts = [shlex.split(p) for p in line.strip().split("&&")]
                configure = next(p for p in parts if p[:2] == ["cmake", "-S"])
                build = next(p for p in parts if p[:2] == ["cmake", "--build"])
                return configure, build
    raise SystemExit(f"{readme}: no `./deploy/install-deps.sh && cmake ...` command found")


def installed_tree(build_dir, work):
    prefix = os.path.join(work, "prefix")
    shutil.rmtree(prefix, ignore_errors=True)
    result = subprocess.run(["cmake", "--install", build_dir, "--prefix", prefix], capture_output=True, text=True,
                            timeout=300)
    if result.returncode != 0:
        raise SystemExit(f"cmake --install {build_dir} failed (build everything first):\n{result.stderr}")
    return prefix


def package_of(path):
    for candidate in (os.path.realpath(path), path):
        result = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
        if result.returncode == 0:
            return result.stdout.split(":", 1)[0].strip()
    return None


def depends(package):
    result = subprocess.run(["dpkg-query", "-W", "-f=${Depends}, ${Pre-Depends}", package], capture_output=True,
                            text=True)
    if result.returncode != 0:
        return set()
    names = set()
    for clause in result.stdout.split(","):
        for alternative in clause.split("|"):
            name = alternative.strip().split(" ")[0].split(":")[0]
            if name:
                names.add(name)
    return names


def closure(roots):
    seen, todo = set(), list(roots)
    while todo:
        package = todo.pop()
        if package in seen:
            continue
        seen.add(package)
        todo += list(depends(package) - seen)
    return seen


def required_packages():
    result = subprocess.run(["dpkg-query", "-W", "-f=${Package} ${Priority}\n"], capture_output=True, text=True)
    return {line.split()[0] for line in result.stdout.splitlines() if line.endswith(" required")}


def shared_libraries(binary):
    result = subprocess.run(["ldd", binary], capture_output=True, text=True)
    libraries = []
    for line in result.stdout.splitlines():
        match = re.match(r"\s*(\S+) => (\S+)", line)
        if match:
            libraries.append((match.group(1), match.group(2)))
    return libraries


def check(args, findings):
    stages = parse(args.dockerfile)
    names = [s.name for s in stages]
    findings.check(len(stages) >= 2, f"{len(stages)} stage(s): want a build and a runtime stage")
    for stage in stages:
        findings.check(stage.name, f"FROM {stage.image}: stage not named (FROM IMAGE AS NAME)")
        if stage.image in names:
            continue
        repository, _, tag = stage.image.partition("@")[0].rpartition(":")
        pinned = "@sha256:" in stage.image or (repository and tag and tag != "latest" and "/" not in tag)
        findings.check(pinned, f"FROM {stage.image}: base image not pinned to a tag")
    build, runtime = stages[0], stages[-1]

    # The build stage: install-deps, README's build, cmake --install.
    build_commands = commands(build)
    findings.check(any(w[0] == "./deploy/install-deps.sh" for w in build_commands),
                   f"stage {build.name} does not run ./deploy/install-deps.sh")
    readme_configure, readme_build = readme_cmake(args.readme)
    configure = next((w for w in build_commands if w[:2] == ["cmake", "-S"]), None)
    if findings.check(configure, f"stage {build.name}: no `cmake -S` configure"):
        missing = set(readme_configure) - set(configure)
        extra = set(configure) - set(readme_configure) - ALLOWED_EXTRA_CONFIGURE
        findings.check(not missing, f"configure lacks README's {sorted(missing)}")
        findings.check(not extra, f"configure adds {sorted(extra)} to README's flags")
    build_step = next((w for w in build_commands if w[:2] == ["cmake", "--build"]), None)
    if findings.check(build_step, f"stage {build.name}: no `cmake --build`"):
        without_jobs = [w for w in build_step if not w.startswith("-j")]
        findings.check(without_jobs == [w for w in readme_build if not w.startswith("-j")],
                       f"`{' '.join(build_step)}` is not README's `{' '.join(readme_build)}` (up to -j)")
    install = next((w for w in build_commands if w[:2] == ["cmake", "--install"]), None)
    prefix = install[install.index("--prefix") + 1] if install and "--prefix" in install else None
    findings.check(prefix, f"stage {build.name}: no `cmake --install BUILD --prefix P`")

    # What the build stage makes beside `cmake --install`: a seed bundle
    # (`jitd bundle create --all ... -o FILE`), checked there, and the files
    # its commands write (the config that mounts the bundle).
    bundles = {}  # stage -> bundle files `jitd bundle create` writes
    written = {}  # stage -> files its commands write
    configs = {}  # (stage, file written) -> bundle paths a `bundle = ...` line written into it names
    verified = set()  # (stage, file) `jitd bundle verify` checks
    for stage in stages:
        for words in commands(stage):
            files = written_files(words)
            written.setdefault(stage.name, set()).update(files)
            for path in files if bundle_lines(words) else ():
                configs.setdefault((stage.name, path), []).extend(bundle_lines(words))
            if len(words) > 2 and words[0].endswith("/jitd") and words[1] == "bundle":
                if words[2] == "create":
                    output = option_value(words, "-o", "--output")
                    if findings.check(output, "`jitd bundle create` without -o FILE"):
                        bundles.setdefault(stage.name, set()).add(output)
                    findings.check("--all" in words, "`jitd bundle create` without --all: the image's bundle must "
                                                     "hold every instantiation of the manifest")
                elif words[2] == "verify":
                    verified.update((stage.name, w) for w in words[3:])
    findings.check(bundles.get(build.name), f"stage {build.name} does not run `jitd bundle create --all ... -o FILE`")
    for output in sorted(bundles.get(build.name, set())):
        findings.check((build.name, output) in verified, f"stage {build.name} does not run `jitd bundle verify {output}`: a bad "
                                           "bundle would pass the build and stop the daemon's start")
    findings.check(any(re.match(r"WARM(=|$)", a) for a in build.all("ARG")),
                   "no ARG WARM: making the seed bundle at build time must be optional")

    # COPY --from sources.
    tree = installed_tree(args.build_dir, args.work)
    cuda_version = None
    for package in apt_installs(build):
        match = re.match(r"cuda-nvrtc-dev-(\d+)-(\d+)$", package)
        if match:
            cuda_version = match.groups()
    findings.check(cuda_version, f"stage {build.name} installs no cuda-nvrtc-dev-MAJOR-MINOR")
    placed = {}  # runtime path -> (stage, source file) of a COPY --from
    for stage in stages:
        for text in stage.all("COPY"):
            words = shlex.split(text)
            source_stage = next((w.split("=", 1)[1] for w in words if w.startswith("--from=")), None)
            paths = [w for w in words if not w.startswith("--")]
            if stage is runtime and len(paths) >= 2:
                for source in paths[:-1]:
                    placed[copy_destination(source.rstrip("/"), paths[-1], paths[:-1])] = (source_stage,
                                                                                          source.rstrip("/"))
                    for output in bundles.get(source_stage, set()) if source_stage else ():
                        if os.path.dirname(output) == source.rstrip("/"):
                            # A directory's contents land in the destination.
                            placed[os.path.join(paths[-1], os.path.basename(output))] = (source_stage, output)
            if source_stage is None:
                continue
            findings.check(source_stage in names[:names.index(stage.name)],
                           f"COPY --from={source_stage}: not an earlier stage")
            sources = [w for w in words if not w.startswith("--")][:-1]
            for source in sources:
                source = source.rstrip("/")
                installed = prefix and (source + "/").startswith(prefix.rstrip("/") + "/")
                findings.check("nvcc" not in source and (installed or not re.search(r"/bin(/|$)", source)),
                               f"COPY --from={source_stage} {source}: a compiler or tool the runtime must not have")
                if installed:
                    relative = os.path.relpath(source, prefix)
                    findings.check(os.path.exists(os.path.join(tree, relative)),
                                   f"COPY --from={source_stage} {source}: `cmake --install` makes no {relative}")
                elif source in bundles.get(source_stage, set()) or \
                        source in {os.path.dirname(b) for b in bundles.get(source_stage, set())}:
                    pass  # the seed bundle `jitd bundle create` wrote in that stage, or its directory
                elif source in written.get(source_stage, set()):
                    pass  # a file a command of that stage wrote (the generated config)
                elif cuda_version and re.fullmatch(rf"/usr/local/cuda-{cuda_version[0]}\.{cuda_version[1]}/"
                                                   r"(targets/[\w-]+/)?include", source):
                    pass  # the toolkit's headers, which NVRTC includes at run time
                else:
                    findings.check(False, f"COPY --from={source_stage} {source}: not a path `cmake --install`, "
                                          "`jitd bundle create` (the bundle or its directory), a command of that "
                                          "stage (cp, > or >>) or the CUDA toolkit's include tree makes")

    # The runtime stage: packages.
    packages = apt_installs(runtime)
    for package in packages:
        findings.check(not FORBIDDEN_RUNTIME_PACKAGE.search(package),
                       f"runtime stage installs {package}: no compiler, nvcc or -dev package belongs there")
    provided = closure(packages) | closure(BASE_ROOTS) | required_packages()
    for binary in (args.jitd, args.jitctl):
        for soname, path in shared_libraries(binary):
            if soname.startswith("libnvrtc"):
                major = soname.split(".so.")[-1]
                findings.check(any(re.fullmatch(rf"cuda-nvrtc-{major}-\d+", p) for p in packages),
                               f"{os.path.basename(binary)} needs {soname}: runtime installs no cuda-nvrtc-{major}-N")
                findings.check(cuda_version and cuda_version[0] == major,
                               f"{soname} but the build stage used CUDA {cuda_version}")
                continue
            package = package_of(path)
            if not findings.check(package, f"{os.path.basename(binary)} needs {path}, from no Debian package here"):
                continue
            findings.check(package in provided,
                           f"{os.path.basename(binary)} needs {soname} (Debian package {package}): "
                           "the runtime stage does not install it")

    # The runtime stage: user, entrypoint, command, health check.
    users = runtime.all("USER")
    user = users[-1].split(":")[0] if users else ""
    findings.check(user.isdigit() and user != "0",
                   f"USER {user or '(none)'}: want a numeric non-root user (Kubernetes' runAsNonRoot checks it)")
    findings.check(any(re.search(rf"useradd\b.*--uid {user}\b", r) for r in runtime.all("RUN")),
                   f"USER {user}: the image creates no such user (useradd --uid {user})")
    entrypoint = exec_form(runtime.all("ENTRYPOINT")[-1]) if runtime.all("ENTRYPOINT") else []
    findings.check(entrypoint == ["jitd"], f"ENTRYPOINT {entrypoint}: want [\"jitd\"]")
    command = exec_form(runtime.all("CMD")[-1]) if runtime.all("CMD") else []
    known, _ = deploy_checks.help_flags(args.jitd)
    for flag in deploy_checks.flags_in(command):
        findings.check(flag in known, f"CMD uses {flag}, which `jitd --help` does not list")
    health = runtime.all("HEALTHCHECK")
    findings.check(health and re.search(r"jitctl.*health", health[-1]), "no HEALTHCHECK running `jitctl health`")
    _, jitctl_help = deploy_checks.help_flags(args.jitctl)
    findings.check(re.search(r"^\s+health\s", jitctl_help, re.M), "`jitctl --help` lists no health verb")
    listen = deploy_checks.flag_value(command, "--listen")
    env = " ".join(runtime.all("ENV"))
    findings.check(listen and f"JITD_ENDPOINT={listen}" in env,
                   f"ENV JITD_ENDPOINT must name CMD's --listen {listen} (the HEALTHCHECK's jitctl uses it)")
    cache_dir = deploy_checks.flag_value(command, "--cache-dir")
    volumes = [v for text in runtime.all("VOLUME") for v in exec_form(text)]
    findings.check(cache_dir in volumes, f"VOLUME {volumes} does not hold CMD's --cache-dir {cache_dir}")
    metrics = deploy_checks.flag_value(command, "--metrics-listen")
    exposed = [p.split("/")[0] for text in runtime.all("EXPOSE") for p in text.split()]
    findings.check(metrics and metrics.rpartition(":")[2] in exposed,
                   f"EXPOSE {exposed} lacks the metrics port of --metrics-listen {metrics}")

    # The runtime stage mounts the build stage's bundle: through the config
    # CMD reads (CMD is exec form, and WARM=0 makes no bundle to name).
    if bundles.get(build.name):
        config = deploy_checks.flag_value(command, "--config")
        config_stage, config_source = placed.get(config, (None, None))
        mounted = configs.get((config_stage, config_source))
        origin = (f"COPY{' --from=' + config_stage if config_stage else ''} {config_source} puts it there"
                  if config_source else "no COPY puts it there")
        if not config:
            findings.check(False, "CMD has no --config: the image's bundle would not be mounted")
        elif findings.check(mounted, f"CMD's --config {config} is not a file stage {build.name} wrote with a "
                                     f"`bundle = ...` line ({origin}): the image's bundle would not be mounted"):
            for name in mounted:
                source_stage, source = placed.get(name, (None, None))
                findings.check(source_stage == build.name and source in bundles[build.name],
                               f"{config} mounts bundle {name}, where no COPY --from={build.name} puts the bundle "
                               f"`jitd bundle create` makes ({', '.join(sorted(bundles[build.name]))})")

    ignore = os.path.join(os.path.dirname(args.dockerfile), os.path.basename(args.dockerfile) + ".dockerignore")
    if findings.check(os.path.exists(ignore), f"no {ignore}: build trees would enter the build context"):
        with open(ignore) as f:
            patterns = set(f.read().split())
        findings.check({".git", "build", "build-*"} <= patterns, f"{ignore} must exclude .git, build and build-*")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dockerfile", required=True)
    parser.add_argument("--readme", required=True)
    parser.add_argument("--build-dir", required=True)
    parser.add_argument("--jitd", required=True)
    parser.add_argument("--jitctl", required=True)
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    findings = deploy_checks.Findings(os.path.relpath(args.dockerfile, deploy_checks.REPO))
    check(args, findings)
    findings.finish()


if __name__ == "__main__":
    main()
