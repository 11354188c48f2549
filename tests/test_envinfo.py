"""The environment record: the source hash names the code that ran, dirty checkout or not."""

import shutil

from softbench.core import envinfo


def test_source_hash_follows_every_source_byte_and_name(tmp_path):
    src = tmp_path / "pkg"
    shutil.copytree(envinfo.Path(envinfo.__file__).parents[1], src, ignore=shutil.ignore_patterns("__pycache__"))
    first = envinfo.source_sha256(src)
    assert first == envinfo.source_sha256(envinfo.Path(envinfo.__file__).parents[1])  # a copy hashes the same
    victim = src / "kernels" / "triton_attn.py"
    victim.write_text(victim.read_text() + "\n")
    edited = envinfo.source_sha256(src)
    assert edited != first
    victim.rename(src / "kernels" / "triton_attn2.py")  # same bytes, another name: another hash
    assert envinfo.source_sha256(src) not in (first, edited)


def test_collect_env_records_the_source_hash():
    env = envinfo.collect_env(gpu=False)
    assert len(env["softbench"]["source_sha256"]) == 64
    assert env["softbench"]["source_sha256"] == envinfo.source_sha256()
