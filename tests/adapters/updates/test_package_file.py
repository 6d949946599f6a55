"""Package files and signatures in process, on small synthetic packages (no model, no subprocess):
fast enough for mutation testing of adapters/updates/package_file.py and adapters/updates/signing.py
(`python .ci/mutation.py model-package`), and each test names the rule it pins."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import stat
import tarfile
from pathlib import Path
from typing import Any, Optional

import pytest

from edge_agent.adapters.host.durable import FILE_MODE
from edge_agent.adapters.updates import package_file, signing
from edge_agent.adapters.updates.package_file import (
    CHUNK,
    FREE_RESERVE,
    MAX_MEMBERS,
    PackageReader,
    describe_file,
    make_dir,
    sha256_file,
    tighten_dir,
    write_package,
)
from edge_agent.core.updates.package import MANIFEST, SIGNATURE, Manifest, PackageFile, manifest_bytes
from edge_agent.errors import ConfigError, ModelError

pytest.importorskip("nacl", reason="signatures need the signing extra (PyNaCl)")


def _files(tmp: Path, probe: int = 1) -> dict[str, Path]:
    src = tmp / "src"
    src.mkdir(exist_ok=True)
    out = {"detector.onnx": src / "det.onnx"}
    out["detector.onnx"].write_bytes(b"D" * 3000 + b"tail")
    for i in range(probe):
        p = src / f"p{i}.jpg"
        p.write_bytes(bytes([i]) * (100 + i))
        out[f"probe/p{i}.jpg"] = p
    return out


def _manifest(sources: dict[str, Path], **over: Any) -> Manifest:
    files = {"detector": describe_file(sources["detector.onnx"], "detector.onnx")}
    probe = [describe_file(p, name) for name, p in sources.items() if name.startswith("probe/")]
    return Manifest(
        name="demo", version="1.0", created_at="2026-11-30T00:00:00Z", files=files, probe=probe, **over
    )


def _pack(tmp: Path, probe: int = 1, sig: Optional[bytes] = None, name: str = "p.pkg") -> Path:
    sources = _files(tmp, probe)
    out = tmp / name
    write_package(out, _manifest(sources), sources, sig)
    return out


def _rewrite(src: Path, dst: Path, change: dict[str, bytes]) -> Path:
    """``src`` copied member by member, with the bytes of the members in ``change`` replaced."""
    with tarfile.open(src) as tin, tarfile.open(dst, "w", format=tarfile.PAX_FORMAT) as tout:
        for m in tin.getmembers():
            data = tin.extractfile(m).read()  # type: ignore[union-attr]
            data = change.get(m.name, data)
            m.size = len(data)
            tout.addfile(m, io.BytesIO(data))
    return dst


def _raw_tar(dst: Path, members: list[tuple[str, bytes]]) -> Path:
    with tarfile.open(dst, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return dst


# ---- signing --------------------------------------------------------------------------------
def test_a_generated_key_is_private_base64_and_matches_its_public_key(tmp_path: Path) -> None:
    key = tmp_path / "k"
    old = os.umask(0)
    try:
        pub = signing.generate_key(key)
    finally:
        os.umask(old)
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    text = key.read_text(encoding="ascii")
    assert text.endswith("\n") and len(base64.b64decode(text.strip(), validate=True)) == 32
    assert len(base64.b64decode(pub, validate=True)) == 32
    assert signing.public_key(key) == pub
    with pytest.raises(FileExistsError):  # never overwrites a key
        signing.generate_key(key)
    assert key.read_text(encoding="ascii") == text
    assert signing.available() is True


def test_a_signature_verifies_against_any_of_several_keys_and_names_which(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    pa, pb = signing.generate_key(a), signing.generate_key(b)
    data = b"manifest bytes"
    sig = signing.sign(data, b)
    assert len(sig) == 64
    assert signing.verify(data, sig, [pb], "pkg") == 0
    assert signing.verify(data, sig, [pa, pb], "pkg") == 1  # a second trusted key (rotation)
    assert signing.verify(data, signing.sign(data, a), [pa, pb], "pkg") == 0
    assert signing.verify(data, None, [], "pkg") is None  # no keys: nothing to check against
    assert signing.verify(data, sig, [], "pkg") is None
    with pytest.raises(ModelError, match=r"^pkg: bad signature: .* any of the 1 trusted key\(s\)$"):
        signing.verify(data, sig, [pa], "pkg")
    with pytest.raises(ModelError, match="of the 2 trusted"):
        signing.verify(data + b"x", sig, [pa, pb], "pkg")
    with pytest.raises(ModelError, match=r"^pkg: unsigned package refused"):
        signing.verify(data, None, [pb], "pkg")
    for cut in (sig[:63], sig + b"\0", b""):  # a wrong-length signature is a refusal, not a crash
        with pytest.raises(ModelError, match="bad signature"):
            signing.verify(data, cut, [pa, pb], "pkg")


def test_malformed_keys_are_config_errors_naming_the_key(tmp_path: Path) -> None:
    good = signing.generate_key(tmp_path / "k")
    signing.check_keys([])
    signing.check_keys([good, " " + good + "\n"])  # surrounding blanks are not part of the key
    short = base64.b64encode(bytes(31)).decode()
    for bad in ("not base64!", short, base64.b64encode(bytes(33)).decode(), ""):
        with pytest.raises(
            ConfigError, match=r"^model_update\.trusted_keys\[1\] = .*expected base64 of a 32-byte"
        ):
            signing.check_keys([good, bad])
    long = "A" * 100
    with pytest.raises(ConfigError) as exc:
        signing.check_keys([long])
    assert repr("A" * 60) in str(exc.value) and "A" * 61 not in str(exc.value)  # cut at 60
    with pytest.raises(ConfigError, match=r"trusted_keys\[0\]"):
        signing.verify(b"d", bytes(64), [short], "pkg")


def test_an_unreadable_or_malformed_key_file_is_one_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing: cannot read the signing key \("):
        signing.sign(b"d", tmp_path / "missing")
    bad = tmp_path / "latin"
    bad.write_bytes(b"\xe9\xe9\xe9")
    with pytest.raises(ConfigError, match="cannot read the signing key"):
        signing.public_key(bad)
    short = tmp_path / "short"
    short.write_text(base64.b64encode(bytes(16)).decode())
    with pytest.raises(ConfigError, match=f"^{short}"):
        signing.sign(b"d", short)


def test_without_pynacl_signatures_are_a_config_error_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import builtins

    real = builtins.__import__

    def no_nacl(name: str, *a: Any, **kw: Any) -> Any:
        if name.startswith("nacl"):
            raise ImportError(name)
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_nacl)
    assert signing.available() is False
    with pytest.raises(ConfigError, match=r"need PyNaCl.*signing"):
        signing.check_keys(["x"])
    signing.check_keys([])  # no keys: the library is not needed
    assert signing.verify(b"d", None, [], "pkg") is None


# ---- files and directories ------------------------------------------------------------------
def test_sha256_file_reads_past_one_chunk(tmp_path: Path) -> None:
    data = os.urandom(CHUNK * 2 + 17)
    (tmp_path / "f").write_bytes(data)
    assert sha256_file(tmp_path / "f") == hashlib.sha256(data).hexdigest()
    pf = describe_file(tmp_path / "f", "a/f")
    assert (pf.path, pf.size, pf.sha256) == ("a/f", len(data), hashlib.sha256(data).hexdigest())


def test_make_dir_gives_every_created_directory_the_mode_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        deep = tmp_path / "a" / "b" / "c"
        assert make_dir(deep) == deep
        assert [stat.S_IMODE((tmp_path / p).stat().st_mode) for p in ("a", "a/b", "a/b/c")] == [0o750] * 3
        make_dir(tmp_path / "a" / "x", 0o700)
        assert stat.S_IMODE((tmp_path / "a" / "x").stat().st_mode) == 0o700
        assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o750  # an existing one is left alone
        make_dir(deep)  # exists: no error
    finally:
        os.umask(old)
    wide = tmp_path / "wide"
    wide.mkdir()
    os.chmod(wide, 0o777)
    tighten_dir(wide, 0o700)
    assert stat.S_IMODE(wide.stat().st_mode) == 0o700
    os.chmod(wide, 0o500)
    tighten_dir(wide, 0o700)  # already narrower: kept
    assert stat.S_IMODE(wide.stat().st_mode) == 0o500


# ---- writing --------------------------------------------------------------------------------
def test_write_package_stores_the_manifest_signature_and_listed_files(tmp_path: Path) -> None:
    pkg = _pack(tmp_path, probe=2, sig=b"S" * 64)
    assert not (tmp_path / "p.pkg.partial").exists()
    with tarfile.open(pkg) as tar:
        names = tar.getnames()
        assert names == [MANIFEST, SIGNATURE, "detector.onnx", "probe/p0.jpg", "probe/p1.jpg"]
        for m in tar.getmembers():
            assert (m.uid, m.gid, m.uname, m.gname) == (0, 0, "", "") and m.isreg()
        man = tar.getmember(MANIFEST)
        assert man.mode == 0o644 and man.mtime > 1.7e9
        assert tar.extractfile(SIGNATURE).read() == b"S" * 64  # type: ignore[union-attr]
        assert tar.extractfile("detector.onnx").read() == b"D" * 3000 + b"tail"  # type: ignore[union-attr]
    with PackageReader(pkg) as r:
        assert r.signature == b"S" * 64
        assert r.manifest_data == manifest_bytes(r.manifest)
        assert [e.path for e in r.entries()] == ["detector.onnx", "probe/p0.jpg", "probe/p1.jpg"]
    unsigned = _pack(tmp_path, name="u.pkg")
    with tarfile.open(unsigned) as tar:
        assert SIGNATURE not in tar.getnames()
    with PackageReader(unsigned) as r:
        assert r.signature is None


def test_a_failed_write_leaves_no_partial_and_no_package(tmp_path: Path) -> None:
    sources = _files(tmp_path)
    m = _manifest(sources)
    sources["probe/p0.jpg"] = tmp_path / "gone.jpg"
    out = tmp_path / "p.pkg"
    with pytest.raises(FileNotFoundError):
        write_package(out, m, sources)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]
    out.write_bytes(b"old")  # a failed write never damages the package already there
    with pytest.raises(FileNotFoundError):
        write_package(out, m, sources)
    assert out.read_bytes() == b"old"


# ---- reading and extracting -----------------------------------------------------------------
def test_extraction_writes_every_listed_file_verified_with_private_modes(tmp_path: Path) -> None:
    pkg = _pack(tmp_path, probe=2, sig=b"S" * 64)
    dest = tmp_path / "v1"
    with PackageReader(pkg) as r:
        r.extract_to(dest)
    got = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert got == ["detector.onnx", MANIFEST, SIGNATURE, "probe/p0.jpg", "probe/p1.jpg"]
    assert (dest / "detector.onnx").read_bytes() == b"D" * 3000 + b"tail"
    assert (dest / "probe/p1.jpg").read_bytes() == bytes([1]) * 101
    assert (dest / SIGNATURE).read_bytes() == b"S" * 64
    for p in ("detector.onnx", "probe/p0.jpg"):
        assert stat.S_IMODE((dest / p).stat().st_mode) == FILE_MODE
    assert stat.S_IMODE((dest / "probe").stat().st_mode) == 0o750
    unsigned = tmp_path / "u"
    with PackageReader(_pack(tmp_path, name="u.pkg")) as r:
        r.extract_to(unsigned)
    assert not (unsigned / SIGNATURE).exists()


@pytest.mark.parametrize("member", ["detector.onnx", "probe/p0.jpg", "probe/p1.jpg"])
def test_every_listed_file_is_hash_checked_probe_images_too(tmp_path: Path, member: str) -> None:
    good = _pack(tmp_path, probe=2)
    with tarfile.open(good) as tar:
        data = tar.extractfile(member).read()  # type: ignore[union-attr]
    bad = _rewrite(good, tmp_path / "bad.pkg", {member: data[:-1] + bytes([data[-1] ^ 1])})  # same size
    with PackageReader(bad) as r, pytest.raises(ModelError) as exc:
        r.extract_to(tmp_path / "x")
    msg = str(exc.value)
    assert msg.startswith(f"{bad}: {member} has sha256 ") and "(corrupt or tampered package)" in msg
    assert f"({len(data)} bytes)" in msg


def test_a_member_of_another_size_than_listed_is_refused_before_writing(tmp_path: Path) -> None:
    good = _pack(tmp_path)
    for data in (b"D" * 3000, b"D" * 3000 + b"tail!"):  # one byte short, one byte long... and more
        bad = _rewrite(good, tmp_path / "bad.pkg", {"detector.onnx": data})
        with PackageReader(bad) as r, pytest.raises(ModelError, match="the manifest says 3004") as exc:
            r.extract_to(tmp_path / "x")
        assert f"detector.onnx is {len(data)} bytes" in str(exc.value)
        assert not (tmp_path / "x").exists()


def test_a_listed_member_missing_is_refused_before_writing(tmp_path: Path) -> None:
    good = _pack(tmp_path)
    with tarfile.open(good) as tin:
        members = [(m.name, tin.extractfile(m).read()) for m in tin.getmembers()]  # type: ignore[union-attr]
    bad = _raw_tar(tmp_path / "bad.pkg", [(n, d) for n, d in members if n != "probe/p0.jpg"])
    with (
        PackageReader(bad) as r,
        pytest.raises(ModelError, match=r"probe/p0.jpg is listed in the manifest but missing"),
    ):
        r.extract_to(tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_not_a_tar_or_no_manifest_is_one_model_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pkg"
    junk.write_bytes(b"not a tar" * 200)
    with pytest.raises(
        ModelError, match=r"junk.pkg: not a model package \(expected a tar from `model pack`\)"
    ):
        PackageReader(junk)
    with pytest.raises(ModelError, match="not a model package"):
        PackageReader(tmp_path / "missing.pkg")
    empty = _raw_tar(tmp_path / "e.pkg", [("other", b"x")])
    with pytest.raises(ModelError, match=r"e.pkg: no manifest.json inside"):
        PackageReader(empty)
    big = _raw_tar(tmp_path / "big.pkg", [(MANIFEST, b" " * ((1 << 20) + 1))])
    with pytest.raises(ModelError, match=r"manifest.json is 1048577 bytes; expected under 1 MiB"):
        PackageReader(big)
    edge = _raw_tar(tmp_path / "edge.pkg", [(MANIFEST, b" " * (1 << 20))])
    with pytest.raises(ModelError, match="is not JSON"):  # exactly 1 MiB is read (and parsed)
        PackageReader(edge)
    sig_big = _rewrite(_pack(tmp_path, sig=b"S" * 64), tmp_path / "sb.pkg", {SIGNATURE: bytes((1 << 20) + 1)})
    with pytest.raises(ModelError, match=r"manifest\.sig is"):
        PackageReader(sig_big)


def test_too_many_members_or_a_duplicate_is_refused(tmp_path: Path) -> None:
    pkg = _pack(tmp_path)
    with tarfile.open(pkg) as tin:
        members = [(m.name, tin.extractfile(m).read()) for m in tin.getmembers()]  # type: ignore[union-attr]
    filler = [(f"f{i}", b"") for i in range(MAX_MEMBERS - len(members))]
    with PackageReader(_raw_tar(tmp_path / "full.pkg", members + filler)) as r:  # exactly the limit
        assert r.manifest.name == "demo"
    with pytest.raises(ModelError, match=f"more than {MAX_MEMBERS} members"):
        PackageReader(_raw_tar(tmp_path / "over.pkg", [*members, *filler, ("one-more", b"")]))
    with pytest.raises(ModelError, match=r"member .detector\.onnx. appears twice"):
        PackageReader(_raw_tar(tmp_path / "dup.pkg", [*members, ("detector.onnx", b"x")]))


def test_a_listed_member_that_is_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    pkg = _pack(tmp_path)
    with tarfile.open(pkg) as tin:
        members = [(m.name, tin.extractfile(m).read()) for m in tin.getmembers()]  # type: ignore[union-attr]
    link = tmp_path / "link.pkg"
    with tarfile.open(link, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if name == "detector.onnx":
                info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
                tar.addfile(info)
                continue
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with PackageReader(link) as r, pytest.raises(ModelError, match=r"'detector.onnx' is not a regular file"):
        r.extract_to(tmp_path / "x")
    sparse = tmp_path / "sparse.pkg"
    with tarfile.open(sparse, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            if name == "detector.onnx":
                info.pax_headers = {"GNU.sparse.realsize": str(len(data))}
            tar.addfile(info, io.BytesIO(data))
    with PackageReader(sparse) as r, pytest.raises(ModelError, match=r"'detector.onnx' is a sparse file"):
        r.extract_to(tmp_path / "x")


def test_members_claiming_more_than_the_file_holds_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pkg = _pack(tmp_path)
    with PackageReader(pkg) as r:
        total = sum(e.size for e in r.entries())
        real_stat = Path.stat

        def small(self: Path, **kw: Any) -> Any:
            st = real_stat(self, **kw)
            if self == pkg:
                return os.stat_result((st.st_mode, 0, 0, 0, 0, 0, total - 1, 0, 0, 0))
            return st

        monkeypatch.setattr(Path, "stat", small)
        with pytest.raises(ModelError, match=f"claim {total} bytes, more than the {total - 1}-byte package"):
            r.extract_to(tmp_path / "x")


def test_extraction_keeps_the_free_space_reserve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = _pack(tmp_path)

    def free(n: int) -> Any:
        class St:
            f_bavail, f_frsize = n, 1

        return lambda path: St()

    with PackageReader(pkg) as r:
        total = sum(e.size for e in r.entries())
        monkeypatch.setattr(package_file.os, "statvfs", free(total + FREE_RESERVE - 1))
        with pytest.raises(
            ModelError,
            match=rf"extracting needs {total} bytes, .* has {total + FREE_RESERVE - 1} bytes free \(and keeps 16 MiB",
        ):
            r.extract_to(tmp_path / "x")
        assert not (tmp_path / "x").exists()
        monkeypatch.setattr(package_file.os, "statvfs", free(total + FREE_RESERVE))
        r.extract_to(tmp_path / "y")  # exactly enough
        assert (tmp_path / "y" / "detector.onnx").is_file()


def test_the_reader_closes_its_tar(tmp_path: Path) -> None:
    pkg = _pack(tmp_path)
    with PackageReader(pkg) as r:
        tar = r._tar
    assert tar.closed  # type: ignore[attr-defined]
    r2 = PackageReader(pkg)
    r2.close()
    assert r2._tar.closed  # type: ignore[attr-defined]


def test_a_package_file_entry_names_its_path() -> None:
    assert PackageFile(path="probe/a.jpg", sha256="0" * 64, size=1).path == "probe/a.jpg"


# ---- survivors of the first mutation run, each pinned --------------------------------------
def test_a_key_with_a_stray_character_is_refused_not_cleaned(tmp_path: Path) -> None:
    good = signing.generate_key(tmp_path / "k")
    stray = good[:10] + "!" + good[10:]  # b64decode without validate would drop the "!"
    with pytest.raises(ConfigError, match="expected base64 of a 32-byte"):
        signing.check_keys([stray])
    utf8 = tmp_path / "utf8"
    utf8.write_text("clé", encoding="utf-8")  # valid UTF-8, not ASCII: unreadable as a key file
    with pytest.raises(ConfigError, match="cannot read the signing key"):
        signing.sign(b"d", utf8)


def test_a_package_appears_by_one_rename_with_its_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from edge_agent.adapters.host import durable

    moves: list[tuple[Path, Path]] = []
    real = os.replace
    monkeypatch.setattr(durable.os, "replace", lambda a, b: (moves.append((Path(a), Path(b))), real(a, b))[1])
    pkg = _pack(tmp_path)
    assert len(moves) == 1 and moves[0][1] == pkg and moves[0][0].parent == tmp_path
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.pkg", "src"]
    assert stat.S_IMODE(pkg.stat().st_mode) == package_file.PACKAGE_MODE


def test_make_dir_goes_on_when_a_directory_appears_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = Path.mkdir
    raced: list[Path] = []

    def racing(self: Path, *a: Any, **kw: Any) -> None:
        if not raced:  # another process creates the first one between our exists() and mkdir()
            raced.append(self)
            real(self)
            raise FileExistsError(self)
        real(self, *a, **kw)

    monkeypatch.setattr(Path, "mkdir", racing)
    deep = tmp_path / "a" / "b" / "c"
    make_dir(deep)
    assert deep.is_dir() and raced == [tmp_path / "a"]


def test_a_compressed_tar_is_not_a_model_package(tmp_path: Path) -> None:
    import gzip

    pkg = _pack(tmp_path)
    gz = tmp_path / "p.pkg.gz"
    gz.write_bytes(gzip.compress(pkg.read_bytes()))  # a gzip bomb would inflate past every size check
    with pytest.raises(ModelError, match="not a model package"):
        PackageReader(gz)


def test_a_bad_manifest_names_the_package_and_leaves_no_file_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[Any] = []
    real_open = tarfile.open

    def recording_open(*a: Any, **kw: Any) -> Any:
        opened.append(real_open(*a, **kw))
        return opened[-1]

    monkeypatch.setattr(package_file.tarfile, "open", recording_open)
    bad = _raw_tar(tmp_path / "bad.pkg", [(MANIFEST, b"{not json")])
    with pytest.raises(ModelError, match=rf"^{bad}: manifest\.json is not JSON"):
        PackageReader(bad)
    with pytest.raises(ModelError, match=r"no manifest\.json inside"):
        PackageReader(_raw_tar(tmp_path / "none.pkg", [("x", b"")]))
    with pytest.raises(ModelError, match="appears twice"):
        PackageReader(_raw_tar(tmp_path / "dup.pkg", [("x", b""), ("x", b"")]))
    assert len(opened) == 6 and all(
        t.closed for t in opened
    )  # 3 written, 3 read: closed at once, not by the GC


def test_a_gnu_sparse_member_is_refused(tmp_path: Path) -> None:
    pkg = _pack(tmp_path)
    with tarfile.open(pkg) as tin:
        members = [(m.name, tin.extractfile(m).read()) for m in tin.getmembers()]  # type: ignore[union-attr]
    sparse = tmp_path / "gnu.pkg"
    with tarfile.open(sparse, "w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            if name == "detector.onnx":
                info.type = tarfile.GNUTYPE_SPARSE
            tar.addfile(info, io.BytesIO(data))
    with PackageReader(sparse) as r, pytest.raises(ModelError, match=r"'detector\.onnx' is a sparse file"):
        r.extract_to(tmp_path / "x")


def test_extraction_never_follows_a_planted_link(tmp_path: Path) -> None:
    pkg = _pack(tmp_path)
    outside = tmp_path / "outside"
    outside.write_bytes(b"keep")
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "detector.onnx").symlink_to(outside)
    with PackageReader(pkg) as r, pytest.raises(OSError):
        r.extract_to(dest)
    assert outside.read_bytes() == b"keep"


def test_a_file_larger_than_one_read_is_counted_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "big.onnx"
    src.write_bytes(os.urandom(CHUNK * 2 + 5))
    sources = {"detector.onnx": src}
    m = Manifest(
        name="demo",
        version="1.0",
        created_at="2026-11-30T00:00:00Z",
        files={"detector": describe_file(src, "detector.onnx")},
    )
    write_package(tmp_path / "big.pkg", m, sources)
    synced: list[str] = []
    monkeypatch.setattr(package_file, "fsync_dir", lambda p: synced.append(Path(p).name))
    with PackageReader(tmp_path / "big.pkg") as r:
        r.extract_to(tmp_path / "v")
    assert (tmp_path / "v" / "detector.onnx").read_bytes() == src.read_bytes()
    assert synced == ["v"]  # the directory holding the files, once


def test_a_tampered_file_is_reported_with_both_hash_prefixes(tmp_path: Path) -> None:
    good = _pack(tmp_path)
    data = b"D" * 3000 + b"tale"
    bad = _rewrite(good, tmp_path / "bad.pkg", {"detector.onnx": data})
    with PackageReader(bad) as r:
        want = r.manifest.files["detector"].sha256
        with pytest.raises(ModelError) as exc:
            r.extract_to(tmp_path / "x")
    got = hashlib.sha256(data).hexdigest()
    assert str(exc.value) == (
        f"{bad}: detector.onnx has sha256 {got[:16]}... (3004 bytes), the manifest says "
        f"{want[:16]}... (3004 bytes) (corrupt or tampered package)"
    )
