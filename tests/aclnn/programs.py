"""Programs written for an Ascend device, built against the installed host
runtime and run: their printed lines must be the ones a device prints.

    programs.py SCENARIO BUILD_DIR SOURCE_ROOT

Scenarios:
  own      the project's four programs (tests/aclnn/programs), built with
           `c++ prog.cpp $(pkg-config --cflags --libs moeperm-aclnn)` and with
           the flags before the source (Debian's --as-needed trap)
  vendor   the vendor's four example programs, unmodified, from the directory
           MOEPERM_VENDOR_EXAMPLES names (e.g. ops-transformer/moe); skipped
           when it is not set
  cann     the CANN-shaped folder as ASCEND_HOME_PATH: a CMake project shaped
           like the vendor's example build, and the vendor's build.sh compile
           line, link the project's programs unchanged

The expected lines come from device_model.py, an independent byte-level
model of what the device computes.  Exit 77 (skip) when a compiler,
pkg-config or cmake is missing.
"""

import glob
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import device_model  # noqa: E402

PROGRAMS = ["moe_token_permute", "moe_token_unpermute", "moe_token_permute_grad",
            "moe_token_unpermute_grad"]
SKIP = 77


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def need(tool):
    path = shutil.which(tool)
    if path is None:
        print("SKIP: no %s on PATH" % tool)
        sys.exit(SKIP)
    return path


def run(args, env=None, cwd=None):
    return subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                          cwd=cwd, universal_newlines=True)


def build_option(build, name):
    import json
    p = run(["meson", "introspect", build, "--buildoptions"])
    if p.returncode != 0:
        fail("meson introspect: " + p.stdout)
    return next(o["value"] for o in json.loads(p.stdout) if o["name"] == name)


class Install:
    """`meson install --destdir` into a scratch directory, and where it put
    things, with pkg-config pointed there."""

    def __init__(self, build, tmp):
        self.dest = os.path.join(tmp, "dest")
        p = run(["meson", "install", "-C", build, "--destdir", self.dest, "--no-rebuild"])
        if p.returncode != 0:
            fail("meson install:\n" + p.stdout)
        prefix = build_option(build, "prefix")
        libdir = build_option(build, "libdir")
        if not os.path.isabs(libdir):
            libdir = os.path.join(prefix, libdir)
        self.libdir = self.dest + libdir
        self.cann = os.path.join(self.libdir, "moeperm", "cann")
        self.env = dict(os.environ)
        self.env["PKG_CONFIG_PATH"] = os.path.join(self.libdir, "pkgconfig")
        self.env["PKG_CONFIG_SYSROOT_DIR"] = self.dest
        self.run_env = dict(os.environ)
        self.run_env["LD_LIBRARY_PATH"] = self.libdir
        # The chip is the default one unless a test says otherwise.
        self.run_env.pop("MOEPERM_ACLNN_CHIP", None)

    def pkg_config(self):
        p = run(["pkg-config", "--cflags", "--libs", "moeperm-aclnn"], env=self.env)
        if p.returncode != 0:
            fail("pkg-config --cflags --libs moeperm-aclnn: " + p.stdout)
        return shlex.split(p.stdout)


def compile_and_compare(cxx, args, exe, expected, what, env):
    p = run([cxx] + args + ["-o", exe])
    if p.returncode != 0:
        fail("%s does not build: %s\n%s" % (what, " ".join([cxx] + args), p.stdout))
    p = run([exe], env=env)
    got = p.stdout.splitlines()
    if p.returncode != 0 or got != expected:
        fail("%s prints what a device would not (exit %d)\n--- expected\n%s\n--- got\n%s"
             % (what, p.returncode, "\n".join(expected), p.stdout))
    print("ok   %s: %d lines as on the device" % (what, len(got)))


def scenario_own(build, root, tmp):
    cxx = need("c++")
    need("pkg-config")
    install = Install(build, tmp)
    flags = install.pkg_config()
    for name in PROGRAMS:
        source = os.path.join(root, "tests", "aclnn", "programs", name + ".cpp")
        expected = device_model.expected_lines(name)
        exe = os.path.join(tmp, name)
        # Strict C++11, as the vendor's own build recipe asks for.
        compile_and_compare(cxx, ["-std=c++11", "-Wall", "-Wextra", "-Werror", source] + flags,
                            exe, expected, name, install.run_env)
        compile_and_compare(cxx, flags + [source], exe + "_flags_first", expected,
                            name + " (flags before the source)", install.run_env)


def scenario_vendor(build, root, tmp):
    where = os.environ.get("MOEPERM_VENDOR_EXAMPLES", "")
    if not where:
        print("SKIP: MOEPERM_VENDOR_EXAMPLES is not set; point it at a directory holding the "
              "vendor's example programs (test_aclnn_moe_token_*.cpp, e.g. ops-transformer/moe)")
        sys.exit(SKIP)
    cxx = need("c++")
    need("pkg-config")
    install = Install(build, tmp)
    flags = install.pkg_config()
    for name in PROGRAMS:
        # The examples sit in an examples/ folder (the vendor's unit tests
        # carry the same file names elsewhere).
        pattern = os.path.join(where, "**", "examples", "test_aclnn_%s.cpp" % name)
        found = glob.glob(pattern, recursive=True)
        if len(found) != 1:
            fail("%s holds %d copies of examples/test_aclnn_%s.cpp; it must hold one"
                 % (where, len(found), name))
        # Unmodified and with the compiler's default dialect, as the
        # vendor's build.sh compiles them.
        compile_and_compare(cxx, [found[0]] + flags, os.path.join(tmp, "vendor_" + name),
                            device_model.expected_lines(name), "vendor's " + found[0],
                            install.run_env)


CMAKE_PROJECT = """\
# Shaped like the vendor's example builds: everything from ASCEND_HOME_PATH,
# the runtime, tensor and operator libraries by their CANN names.
cmake_minimum_required(VERSION 3.14)
project(aclnn_examples CXX)
add_compile_options(-std=c++11)
set(ASCEND_PATH $ENV{ASCEND_HOME_PATH})
include_directories(${ASCEND_PATH}/include ${ASCEND_PATH}/include/aclnn
                    ${ASCEND_PATH}/include/aclnnop ${PROGRAMS_DIR})
link_directories(${ASCEND_PATH}/lib64)
foreach(name %s)
  add_executable(${name} ${PROGRAMS_DIR}/${name}.cpp)
  target_link_libraries(${name} PRIVATE opapi_transformer ascendcl nnopbase c_sec)
endforeach()
""" % " ".join(PROGRAMS)


def scenario_cann(build, root, tmp):
    cxx = need("c++")
    cmake = need("cmake")
    install = Install(build, tmp)
    home = install.cann
    env = dict(os.environ)
    env["ASCEND_HOME_PATH"] = home
    run_env = dict(install.run_env)
    # At run time CANN's set_env.sh puts lib64 on the loader path; nothing else.
    run_env["LD_LIBRARY_PATH"] = os.path.join(home, "lib64")
    programs = os.path.join(root, "tests", "aclnn", "programs")

    project = os.path.join(tmp, "cmake_project")
    os.makedirs(project)
    with open(os.path.join(project, "CMakeLists.txt"), "w") as f:
        f.write(CMAKE_PROJECT)
    out = os.path.join(tmp, "cmake_build")
    p = run([cmake, "-S", project, "-B", out, "-DPROGRAMS_DIR=" + programs], env=env)
    if p.returncode != 0:
        fail("cmake configure with ASCEND_HOME_PATH=%s:\n%s" % (home, p.stdout))
    p = run([cmake, "--build", out], env=env)
    if p.returncode != 0:
        fail("cmake build with ASCEND_HOME_PATH=%s:\n%s" % (home, p.stdout))
    for name in PROGRAMS:
        p = run([os.path.join(out, name)], env=run_env)
        expected = device_model.expected_lines(name)
        if p.returncode != 0 or p.stdout.splitlines() != expected:
            fail("%s built by CMake from ASCEND_HOME_PATH prints what a device would not "
                 "(exit %d):\n%s" % (name, p.returncode, p.stdout))
        print("ok   %s: CMake from ASCEND_HOME_PATH" % name)

    # The vendor's build.sh compile line (package mode), paths from the
    # same variable.
    inc = os.path.join(home, "include")
    lib = os.path.join(home, "lib64")
    name = PROGRAMS[3]
    args = [os.path.join(programs, name + ".cpp"), "-I", inc, "-I", os.path.join(inc, "aclnn"),
            "-I", os.path.join(inc, "aclnnop"), "-L", lib, "-lopapi", "-lopapi_transformer",
            "-lascendcl", "-lnnopbase", "-lpthread", "-lhccl"]
    compile_and_compare(cxx, args, os.path.join(tmp, "build_sh_" + name),
                        device_model.expected_lines(name), name + " (build.sh's line)", run_env)


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        sys.exit(2)
    scenario, build, root = sys.argv[1:]
    scenarios = {"own": scenario_own, "vendor": scenario_vendor, "cann": scenario_cann}
    tmp = tempfile.mkdtemp(prefix="moeperm-aclnn-")
    try:
        scenarios[scenario](os.path.abspath(build), os.path.abspath(root), tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
