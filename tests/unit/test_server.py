"""``fdbrecipes server``'s parts that need no FoundationDB: the assets each platform
uses, checksum files, unpacking Debian packages, the search order, the installer's
refusals, and the command line."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict

import pytest

from fdbrecipes import cli
from fdbrecipes.server import find, releases
from fdbrecipes.server.install import InstallError, install
from fdbrecipes.server.releases import (
    UnsupportedPlatformError,
    check_version,
    parse_sha256,
    platform_key,
    release,
)
from fdbrecipes.server.unpack import PackageError, unpack
from tests.release_tree import build_deb, serving

DPKG_DEB = shutil.which("dpkg-deb")
needs_dpkg = pytest.mark.skipif(DPKG_DEB is None, reason="dpkg-deb is not installed")


# -- which assets ------------------------------------------------------------------------


def test_each_platform_uses_the_official_asset_names() -> None:
    names = {p: [a.name for a in release("7.3.79", p).assets] for p in releases.PLATFORMS}
    assert names == {
        "linux-x86_64": ["foundationdb-clients_7.3.79-1_amd64.deb",
                         "foundationdb-server_7.3.79-1_amd64.deb"],
        "linux-aarch64": ["foundationdb-clients_7.3.79-1_aarch64.deb",
                          "foundationdb-server_7.3.79-1_aarch64.deb"],
        "macos-arm64": ["FoundationDB-7.3.79_arm64.pkg"],
        "macos-x86_64": ["FoundationDB-7.3.79_x86_64.pkg"],
    }
    linux = release("7.3.79", "linux-x86_64")
    assert sorted(linux.files) == ["bin/fdbcli", "bin/fdbserver", "lib/libfdb_c.so"]
    assert dict(linux.assets[1].files) == {"bin/fdbserver": "usr/sbin/fdbserver"}
    mac = release("7.3.79", "macos-arm64")
    assert sorted(mac.files) == ["bin/fdbcli", "bin/fdbserver", "lib/libfdb_c.dylib"]
    assert mac.assets[0].files["bin/fdbserver"].endswith("usr/local/libexec/fdbserver")


@pytest.mark.parametrize(("system", "machine", "key"), [
    ("Linux", "x86_64", "linux-x86_64"), ("Linux", "AMD64", "linux-x86_64"),
    ("Linux", "aarch64", "linux-aarch64"), ("Linux", "arm64", "linux-aarch64"),
    ("Darwin", "arm64", "macos-arm64"), ("Darwin", "x86_64", "macos-x86_64"),
])
def test_the_platform_is_named_as_the_releases_name_it(system: str, machine: str,
                                                        key: str) -> None:
    assert platform_key(system, machine) == key


@pytest.mark.parametrize(("system", "machine"), [
    ("Windows", "AMD64"), ("Linux", "ppc64le"), ("Linux", "s390x"), ("Linux", "armv7l"),
    ("FreeBSD", "amd64"),
])
def test_a_platform_no_release_covers_is_refused_by_name(system: str, machine: str) -> None:
    with pytest.raises(UnsupportedPlatformError, match=f"no release for {system}") as raised:
        platform_key(system, machine)
    assert "Linux x86_64 and aarch64 and macOS arm64 and x86_64" in str(raised.value)


def test_the_default_version_is_the_one_ci_tests() -> None:
    ci = (Path(__file__).resolve().parents[2] / ".github/workflows/ci.yml").read_text()
    assert f'FDB_VERSION: "{releases.DEFAULT_VERSION}"' in ci


@pytest.mark.parametrize(("version", "error"), [
    (730, TypeError), ("7.3", ValueError), ("7.3.79; rm", ValueError), ("../7.3.79", ValueError),
])
def test_a_bad_version_is_refused(version: object, error: type) -> None:
    with pytest.raises(error, match="version must be"):
        check_version(version)


def test_checksum_files_are_read_in_either_format() -> None:
    digest = "ab" * 32
    assert parse_sha256(digest) == digest
    assert parse_sha256(f"{digest.upper()}  foundationdb-server_7.3.79-1_amd64.deb\n") == digest
    assert parse_sha256("<html>not found</html>") is None


# -- unpacking ---------------------------------------------------------------------------


@pytest.fixture
def payload(tmp_path: Path) -> Dict[str, Path]:
    files = {}
    for name, body in (("fdbcli", b"#!/bin/sh\n"), ("libfdb_c.so", os.urandom(300_001))):
        files[name] = tmp_path / "src" / name
        files[name].parent.mkdir(exist_ok=True)
        files[name].write_bytes(body)
    return files


@needs_dpkg
@pytest.mark.parametrize("compression", ["gzip", "xz", "none", "zstd"])
def test_a_deb_is_unpacked_without_dpkg(compression: str, payload: Dict[str, Path],
                                        tmp_path: Path) -> None:
    """dpkg-deb's own packages, in every compression it writes: the files asked for,
    byte for byte, executable; a symbolic link inside the package is followed."""
    root = tmp_path / "pkg"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text("Package: t\nVersion: 1\nArchitecture: all\n"
                                             "Maintainer: t\nDescription: t\n")
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/lib").mkdir(parents=True)
    shutil.copy(payload["fdbcli"], root / "usr/bin/fdbcli")
    shutil.copy(payload["libfdb_c.so"], root / "usr/lib/libfdb_c.so.7")
    (root / "usr/lib/libfdb_c.so").symlink_to("libfdb_c.so.7")
    deb = tmp_path / "t.deb"
    subprocess.run(["dpkg-deb", f"-Z{compression}", "--build", str(root), str(deb)],
                   check=True, capture_output=True)
    into = tmp_path / "out"
    files = {"bin/fdbcli": "usr/bin/fdbcli", "lib/libfdb_c.so": "usr/lib/libfdb_c.so"}
    if compression == "zstd" and sys.version_info < (3, 14):
        with pytest.raises(PackageError, match="zstd needs Python 3.14"):
            unpack("deb", deb, files, into)
        return
    unpack("deb", deb, files, into)
    assert (into / "bin/fdbcli").read_bytes() == payload["fdbcli"].read_bytes()
    assert (into / "lib/libfdb_c.so").read_bytes() == payload["libfdb_c.so"].read_bytes()
    assert (into / "bin/fdbcli").stat().st_mode & stat.S_IXUSR


@needs_dpkg
def test_a_file_missing_from_a_package_is_named(payload: Dict[str, Path],
                                                tmp_path: Path) -> None:
    deb = tmp_path / "t.deb"
    build_deb("t", "1", {"usr/bin/fdbcli": payload["fdbcli"]}, deb)
    with pytest.raises(PackageError, match="usr/sbin/fdbserver is not in the package"):
        unpack("deb", deb, {"bin/fdbserver": "usr/sbin/fdbserver"}, tmp_path / "out")


def test_what_is_not_a_deb_is_refused(tmp_path: Path) -> None:
    junk = tmp_path / "junk.deb"
    junk.write_bytes(b"<html>a login page</html>")
    with pytest.raises(PackageError, match="not a Debian package"):
        unpack("deb", junk, {"bin/fdbcli": "usr/bin/fdbcli"}, tmp_path / "out")


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS has pkgutil")
def test_a_macos_package_needs_pkgutil(tmp_path: Path) -> None:
    pkg = tmp_path / "FoundationDB-7.3.79_arm64.pkg"
    pkg.write_bytes(b"xar!")
    with pytest.raises(PackageError, match="pkgutil, which only macOS has"):
        unpack("pkg", pkg, {"bin/fdbcli": "x"}, tmp_path / "out")


# -- the search order --------------------------------------------------------------------


def _program(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def _installed(root: Path, version: str, platform: str = "linux-x86_64") -> Path:
    folder = root / version
    for name in ("fdbserver", "fdbcli"):
        _program(folder / "bin" / name)
    (folder / "lib").mkdir()
    (folder / "lib" / releases.library_name(platform)).write_bytes(b"")
    (folder / find.RECORD).write_text(json.dumps({"platform": platform, "source": "test"}))
    return folder


@pytest.fixture
def nothing_around(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No FDBSERVER/FDBCLI, an empty PATH, no library path, an empty install root
    (returned); the packages' places stay as this machine has them."""
    for name in ("FDBSERVER", "FDBCLI", "LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    root = tmp_path / "installs"
    monkeypatch.setenv(find.SERVER_DIR_VARIABLE, str(root))
    return root


def test_explicit_then_path_then_installed(nothing_around: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    installed = _installed(nothing_around, "7.3.79")
    found = find.find_program("fdbserver", "FDBSERVER")
    assert (found.path, found.source) == (str(installed / "bin/fdbserver"), "installed")
    assert "7.3.79" in found.why

    on_path = _program(tmp_path / "bin" / "fdbserver")
    monkeypatch.setenv("PATH", str(on_path.parent))
    assert find.find_program("fdbserver", "FDBSERVER").source == "PATH"

    explicit = _program(tmp_path / "elsewhere" / "fdbserver")
    monkeypatch.setenv("FDBSERVER", str(explicit))
    found = find.find_program("fdbserver", "FDBSERVER")
    assert (found.path, found.source, found.why) == (str(explicit), "explicit", "$FDBSERVER")


def test_an_explicit_program_that_is_not_there_stops_the_search(
        nothing_around: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _installed(nothing_around, "7.3.79")
    monkeypatch.setenv("FDBCLI", str(tmp_path / "no-such-fdbcli"))
    found = find.find_program("fdbcli", "FDBCLI")
    assert found.path is None and "$FDBCLI is" in found.why and "not an executable" in found.why


def test_the_installed_version_matching_the_bindings_is_chosen(
        nothing_around: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for version in ("7.1.61", "7.3.69", "7.3.79", "8.0.1"):
        _installed(nothing_around, version)
    (nothing_around / "7.3.99").mkdir()  # no record: an install that never finished
    assert [i.version for i in find.installed()] == ["7.1.61", "7.3.69", "7.3.79", "8.0.1"]
    monkeypatch.setattr(find, "bindings_version", lambda: "7.3.79")
    assert find.chosen_install() is not None and find.chosen_install().version == "7.3.79"
    monkeypatch.setattr(find, "bindings_version", lambda: "7.1.0")
    assert find.chosen_install().version == "7.1.61"  # type: ignore[union-attr]
    monkeypatch.setattr(find, "bindings_version", lambda: "6.3.24")
    assert find.chosen_install().version == "8.0.1"  # type: ignore[union-attr]


@pytest.mark.skipif(sys.platform == "darwin", reason="the Linux order")
def test_the_library_path_comes_before_the_installed_copy(
        nothing_around: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    installed = _installed(nothing_around, "7.3.79")
    found = find.find_client_library()
    if found.source == "bindings":
        pytest.skip("the bindings carry their own libfdb_c here")
    assert (found.path, found.source) == (str(installed / "lib/libfdb_c.so"), "installed")
    folder = tmp_path / "libs"
    folder.mkdir()
    (folder / "libfdb_c.so").write_bytes(b"")
    monkeypatch.setenv("LD_LIBRARY_PATH", f"/nowhere:{folder}")
    found = find.find_client_library()
    assert (found.path, found.source) == (str(folder / "libfdb_c.so"), "LD_LIBRARY_PATH")


def test_the_data_folder_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(find.SERVER_DIR_VARIABLE, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    if sys.platform != "darwin":
        assert find.installed_root() == tmp_path / "xdg" / "fdbrecipes" / "foundationdb"
    assert find.installed_root(str(tmp_path / "mine")) == tmp_path / "mine"


# -- the installer's refusals ------------------------------------------------------------


def test_an_unreachable_host_fails_in_seconds_naming_the_url_and_from(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(InstallError) as raised:
        install("7.3.79", str(tmp_path / "root"), f"http://127.0.0.1:{port}/mirror",
                platform="linux-x86_64", out=None)
    assert time.monotonic() - started < 10
    message = str(raised.value)
    assert f"http://127.0.0.1:{port}/mirror/7.3.79/foundationdb-clients_7.3.79-1_amd64.deb" \
        in message and "--from" in message and "nothing installed" in message
    assert not (tmp_path / "root" / "7.3.79").exists()


@needs_dpkg
def test_a_package_without_a_checksum_is_refused(payload: Dict[str, Path],
                                                 tmp_path: Path) -> None:
    tree = tmp_path / "tree" / "7.3.79"
    tree.mkdir(parents=True)
    for asset in release("7.3.79", "linux-x86_64").assets:
        build_deb("t", "7.3.79", {"usr/bin/fdbcli": payload["fdbcli"]}, tree / asset.name)
    (tree / "foundationdb-server_7.3.79-1_amd64.deb.sha256").unlink()
    with serving(tmp_path / "tree") as server, pytest.raises(InstallError) as raised:
        install("7.3.79", str(tmp_path / "root"), server.url, platform="linux-x86_64",
                out=None)
    assert "no SHA-256 to check foundationdb-server_7.3.79-1_amd64.deb against" in \
        str(raised.value)
    assert sorted(p.name for p in (tmp_path / "root").iterdir()) == [".lock"]


def test_a_release_without_the_platforms_asset_says_so(tmp_path: Path) -> None:
    (tmp_path / "tree" / "7.3.30").mkdir(parents=True)
    with serving(tmp_path / "tree") as server, pytest.raises(InstallError) as raised:
        install("7.3.30", str(tmp_path / "root"), server.url, platform="linux-aarch64",
                out=None)
    assert "foundationdb-clients_7.3.30-1_aarch64.deb does not exist" in str(raised.value)
    assert "may publish no" in str(raised.value)


# -- the command line ----------------------------------------------------------------------


def test_the_server_actions_parse_and_need_no_client_library() -> None:
    parser = cli.build_parser()
    args = parser.parse_args(["server", "install", "--version", "7.3.69", "--dir", "/x",
                              "--from", "http://mirror/"])
    assert (args.action, args.version, args.directory, args.source) == \
        ("install", "7.3.69", "/x", "http://mirror/")
    assert parser.parse_args(["server", "start", "--processes", "3"]).processes == 3
    done = subprocess.run([sys.executable, "-c", "import sys; from fdbrecipes import cli; "
                           "cli.main(['server', 'info', '--json']); "
                           "print('fdb.impl' in sys.modules)"],
                          capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip().endswith("False")
    assert json.loads(done.stdout.rsplit("\n", 2)[0])["bindings"]


def test_server_without_an_action_says_what_to_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["server"]) == 2
    assert "name an action: install, info, start, stop or status" in capsys.readouterr().err
