"""stable_diffusion's rehearsal: ``python main.py ... -b configs/train_32x08x08.yaml`` of
retired_benchmarks/stable_diffusion (aa344c7), one task per GPU on two nodes of the box.

The reference cannot run here (``main.py`` imports torchvision, PyTorch Lightning 1.9.4, open_clip 2.7.0, xformers),
so the probe runs the reference's own pieces at the pinned commit on the job's argv: ``get_parser`` compiled from
``main.py`` and ``parse_known_args`` as main.py:398 calls it, then the config as main.py:456-458 builds it
(``OmegaConf.load`` of every ``-b`` file, ``OmegaConf.from_dotlist`` of the unknown arguments, ``merge``; where
OmegaConf is not installed, the same merge of the YAML files with the dotlist's YAML-parsed values). With the merged
config it checks every input the reference opens before its first GPU step and what validation reads:
``data.params.train.params.urls`` (webdataset's brace expansion, each tar), ``data.params.validation.params.annotations_file``
(ldm/data/tsv.py's columns), ``model.params.validation_config.fid.gt_path`` (fid_score.py's ``mu``/``sigma``),
``--ckpt`` (LatentDiffusion loads it), the Inception weights (ldm/modules/fid/inception.py:221,
``load_state_dict_from_url(FID_WEIGHTS_URL, model_dir=fid.cache_dir)``) and the OpenCLIP weights the text encoder and
the CLIP score load (open_clip 2.7.0: ``hf_hub_download`` into ``cache_dir``, or the round patch's local file). Then
the Lightning geometry: ``lightning.trainer.num_nodes`` x ``devices`` against the SLURM world that Lightning 1.9.4's
``SLURMEnvironment`` reads (SLURM_NTASKS, SLURM_NTASKS_PER_NODE, SLURM_JOB_NAME not ``bash``). The log goes to
``$COMPLIANCE_FILE`` (mlperf_logging_utils.py:40, SDLogger's default file).
"""

from __future__ import annotations

import argparse
import io
import os
import random
import re
import sys
import tarfile
from pathlib import Path

from tests.rehearsal.spec import Rehearsal

REHEARSAL = Rehearsal(
    benchmark="stable_diffusion",
    image_files={"/diffusion": "mlcommons-training-aa344c7/retired_benchmarks/stable_diffusion"},
    entry=("main.py",),
    nodes=2,
)

MOMENT_TARS = 832
"""``{00000..00831}.tar``: the config's urls and the published .md5 list's 832 files (catalog file_count)."""
CLIP_REPOSITORY = "laion/CLIP-ViT-H-14-laion2B-s32B-b79K"
CLIP_FILE = "open_clip_pytorch_model.bin"
"""open_clip 2.7.0 (the reference's requirements.txt): pretrained.py:138 ``laion2b_s32b_b79k=_pcfg(hf_hub=
'laion/CLIP-ViT-H-14-laion2B-s32B-b79K/')``; download_pretrained (:303-312) then calls ``hf_hub_download(model_id,
'open_clip_pytorch_model.bin', cache_dir=cache_dir)``."""


def _write_tar(path: Path, members: dict[str, bytes]) -> None:
    with tarfile.open(path, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def published(dataset_id: str, folder: Path) -> None:
    """Each dataset as the R2 downloader leaves it (the README's ``-d`` folders; names from the reference's download
    scripts, tiny contents)."""
    import numpy as np
    import torch

    if dataset_id == "laion_400m_filtered_moments":
        for index in range(MOMENT_TARS):
            moments = io.BytesIO()
            np.save(moments, np.zeros((1, 8, 4, 4), dtype=np.float32))
            _write_tar(folder / f"{index:05d}.tar", {f"{index:09d}.npy": moments.getvalue(), f"{index:09d}.txt": b"a red circle"})
    elif dataset_id == "sd_coco2014_validation_prompts":
        (folder / "val2014_30k.tsv").write_text("image_id\tid\tcaption\n9\t17\ta red circle\n25\t41\ta blue square\n")
    elif dataset_id == "sd_coco2014_validation_stats":
        np.savez(folder / "val2014_30k_stats.npz", mu=np.zeros(8), sigma=np.eye(8))
    elif dataset_id == "sd_checkpoint":
        torch.save({"state_dict": {}}, folder / "512-base-ema.ckpt")
    elif dataset_id == "sd_inception_checkpoint":
        torch.save({}, folder / "pt_inception-2015-12-05-6726825d.pth")
    elif dataset_id == "sd_clip_checkpoint":
        # scripts/checkpoints/download_clip.sh's two files (the R2 list is not readable here; see the README)
        torch.save({}, folder / CLIP_FILE)
        (folder / "open_clip_config.json").write_text('{"model_cfg": {"embed_dim": 1024}}\n')
    else:
        raise ValueError(f"stable_diffusion does not read {dataset_id}")


def load_config(ctx, bases: list[str], dotlist: list[str]) -> dict:
    """main.py:456-458: the ``-b`` files merged left to right, then the dotlist of the unknown arguments."""
    try:
        from omegaconf import OmegaConf
    except ImportError:
        import yaml

        config: dict = {}
        for base in bases:
            _merge(config, yaml.safe_load(ctx.opens(base, "-b config (OmegaConf.load)", size=1 << 20)))
        for item in dotlist:
            key, _, value = item.partition("=")
            overlay: dict = {}
            node = overlay
            *parents, last = key.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[last] = yaml.safe_load(value)  # OmegaConf.from_dotlist parses each value as YAML
            _merge(config, overlay)
        ctx.record("config", ", ".join(bases), "main.py:456-458 (OmegaConf not installed: YAML merge of the same files and dotlist)", True)
        return config
    configs = [OmegaConf.load(str(ctx.path(base, "-b config (OmegaConf.load)", kind="file"))) for base in bases]
    merged = OmegaConf.merge(*configs, OmegaConf.from_dotlist(dotlist))
    ctx.record("config", ", ".join(bases), "main.py:456-458 (OmegaConf.load, from_dotlist, merge)", True)
    return OmegaConf.to_container(merged, resolve=True)


def _merge(into: dict, overlay: dict) -> None:
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def brace_expand(pattern: str) -> list[str]:
    """webdataset's ``braceexpand`` of the numeric ranges ``{00000..00831}`` (zero padding kept)."""
    match = re.search(r"\{(\d+)\.\.(\d+)\}", pattern)
    if not match:
        return [pattern]
    first, last = match.group(1), match.group(2)
    width = len(first) if first.startswith("0") else 0
    expanded = [pattern[: match.start()] + str(i).zfill(width) + pattern[match.end() :] for i in range(int(first), int(last) + 1)]
    return [path for item in expanded for path in brace_expand(item)]


def _at(config: dict, dotted: str):
    node = config
    for part in dotted.split("."):
        node = node[part]
    return node


def probe(ctx) -> None:
    sys.argv = ["main.py", *ctx.argv]
    get_parser = ctx.reference_function("main.py", "get_parser", {"argparse": argparse, "random": random})
    try:
        opt, unknown = get_parser().parse_known_args()
    except SystemExit:
        ctx.fail(f"main.py's get_parser (main.py:45-185) refuses the job's arguments {ctx.argv} (its error is above)")
    ctx.equal("main.py --mode", opt.mode, "train", "run_and_time.sh's -m train")
    # the rules' targets; main.py:564 and :683-686 stop and judge the run with them
    ctx.equal("main.py opt.fid_threshold", opt.fid_threshold, 90, "the rules' FID target (main.py ListEarlyStopping and the run's status)")
    ctx.equal("main.py opt.clip_threshold", opt.clip_threshold, 0.15, "the rules' CLIP target (main.py ListEarlyStopping and the run's status)")
    config = load_config(ctx, opt.base, unknown)

    urls = _at(config, "data.params.train.params.urls")
    tars = brace_expand(urls)
    ctx.equal("tars of data.params.train.params.urls", len(tars), MOMENT_TARS, "configs/train_32x08x08.yaml's {00000..00831}")
    missing = [tar for tar in tars if not os.path.isfile(tar)]
    if missing:
        ctx.path(missing[0], f"webdataset shard of data.params.train.params.urls ({len(missing)} of {len(tars)} missing)", kind="file")
    ctx.record("path", urls, "every webdataset shard of data.params.train.params.urls", True, f"{len(tars)} files")
    with tarfile.open(tars[0]) as tar:
        extensions = {name.rpartition(".")[2] for name in tar.getnames()}
    keep = set(_at(config, "data.params.train.params.keep_only_keys"))
    ctx.equal("member kinds of the first shard", sorted(keep & extensions), sorted(keep), "ldm/data/webdatasets.py keep_only_keys")

    annotations = _at(config, "data.params.validation.params.annotations_file")
    header = ctx.opens(annotations, "data.params.validation.params.annotations_file (ldm/data/tsv.py read_csv)", size=4096).decode().splitlines()[0]
    columns = set(header.split("\t"))
    for key in _at(config, "data.params.validation.params.keys"):
        ctx.equal(f"column {key} of {annotations}", key in columns, True, "ldm/data/tsv.py TsvDataset keys")
    fid = _at(config, "model.params.validation_config.fid")
    gt_path = ctx.path(fid["gt_path"], "model.params.validation_config.fid.gt_path (fid_score.compute_statistics_of_path)", kind="file")
    import numpy as np

    with np.load(gt_path) as stats:
        ctx.equal(f"arrays of {fid['gt_path']}", sorted({"mu", "sigma"} & set(stats.files)), ["mu", "sigma"], "fid_score.py:239-241")

    ctx.opens(opt.ckpt, "--ckpt (main.py:443-484 puts it in model.params.ckpt; LatentDiffusion loads it)")
    inception_url = re.search(r"^FID_WEIGHTS_URL = '([^']+)'", ctx.path("ldm/modules/fid/inception.py", "FID_WEIGHTS_URL").read_text(), re.M)
    if not inception_url:
        ctx.fail("ldm/modules/fid/inception.py names no FID_WEIGHTS_URL at the pinned commit")
    inception = os.path.join(fid["cache_dir"], inception_url.group(1).rsplit("/", 1)[1])
    ctx.opens(inception, "ldm/modules/fid/inception.py:221 load_state_dict_from_url(FID_WEIGHTS_URL, model_dir=fid.cache_dir)")
    requirements = ctx.path("requirements.txt", "the reference's pinned packages").read_text()
    ctx.equal("open_clip pinned by requirements.txt", "open-clip-torch==2.7.0" in requirements, True, "the open_clip whose resolution the probe follows")
    for where, cache_dir in (
        ("model.params.cond_stage_config.params.cache_dir", _at(config, "model.params.cond_stage_config.params.cache_dir")),
        ("model.params.validation_config.clip.cache_dir", _at(config, "model.params.validation_config.clip.cache_dir")),
    ):
        _check_clip_weights(ctx, where, cache_dir)

    _check_geometry(ctx, config)
    _check_no_checkpoints(ctx, config)
    result = ctx.variable("COMPLIANCE_FILE", "mlperf_logging_utils.py:40 SDLogger's file")
    ctx.mllog_to(result, "mlperf_logging_utils.SDLogger writes $COMPLIANCE_FILE")


def _check_clip_weights(ctx, where: str, cache_dir: str) -> None:
    """The file open_clip 2.7.0 loads for ViT-H-14 laion2b_s32b_b79k: the hub cache's snapshot in ``cache_dir``, or
    (the round patch, where the image has it) the downloaded file itself in ``cache_dir``."""
    snapshots = Path(cache_dir) / f"models--{CLIP_REPOSITORY.replace('/', '--')}" / "snapshots"
    cached = sorted(snapshots.glob(f"*/{CLIP_FILE}")) if snapshots.is_dir() else []
    if cached:
        ctx.opens(cached[0], f"{where}: hf_hub_download's cached {CLIP_FILE}")
        return
    chosen = None
    if "mlperf_wf_stable_diffusion" in os.environ.get("MLPERF_WF_HOOKS", "").split(","):
        import mlperf_wf_stable_diffusion as patch  # the round patch the image installs

        local = getattr(patch, "local_open_clip_weights", None)
        chosen = local({"hf_hub": f"{CLIP_REPOSITORY}/"}, cache_dir) if local else None
    if not chosen:
        ctx.fail(
            f"{where}: open_clip 2.7.0 loads ViT-H-14 laion2b_s32b_b79k through hf_hub_download({CLIP_REPOSITORY!r}, {CLIP_FILE!r}, "
            f"cache_dir={cache_dir!r}), which needs {snapshots}/<revision>/{CLIP_FILE}; the mount has "
            f"{sorted(p.name for p in Path(cache_dir).iterdir()) if Path(cache_dir).is_dir() else 'nothing'} (read-only, no hub here)"
        )
    ctx.opens(chosen, f"{where}: the round patch's local open_clip weights")


def _check_no_checkpoints(ctx, config: dict) -> None:
    """The ModelCheckpoint main.py makes (main.py:589-603: its defaults, save_last true, under the config's
    ``lightning.modelcheckpoint``) saves nothing: Lightning writes a checkpoint for save_top_k != 0 or save_last, every
    ``every_n_train_steps`` (250 in the config), inside the timed region."""
    params = {"save_last": True, **(_at(config, "lightning.modelcheckpoint.params") or {})}
    kept = {key: params.get(key) for key in ("save_top_k", "save_last")}
    ctx.equal("ModelCheckpoint save_top_k, save_last", kept, {"save_top_k": 0, "save_last": False}, "no checkpoint in the timed region")


def _check_geometry(ctx, config: dict) -> None:
    """Lightning 1.9.4 (requirements.txt) under srun: SLURMEnvironment when SLURM_NTASKS is set and the job is not
    named ``bash`` (_is_srun_used), world size SLURM_NTASKS, ranks SLURM_PROCID/LOCALID, SLURM_NTASKS_PER_NODE required
    when more than one task (_validate_srun_variables); DDP's samplers use trainer num_nodes x devices."""
    trainer = _at(config, "lightning.trainer")
    nodes, devices = int(trainer["num_nodes"]), int(trainer["devices"])
    ctx.variable("SLURM_NTASKS", "Lightning's SLURMEnvironment world size")
    per_node = ctx.variable("SLURM_NTASKS_PER_NODE", "Lightning's _validate_srun_variables (more than one task)")
    job_name = os.environ.get("SLURM_JOB_NAME", "")
    ctx.equal("SLURM_JOB_NAME is not bash", job_name != "bash", True, "Lightning's _is_srun_used (a job named bash spawns its own ranks)")
    step_nodes = ctx.variable("SLURM_NNODES", "the nodes of the srun step")
    ctx.equal("lightning.trainer.num_nodes", nodes, int(step_nodes), "SLURM_NNODES (the nodes srun started)")
    ctx.equal("lightning.trainer.devices", devices, int(per_node.split("(")[0]), "SLURM_NTASKS_PER_NODE")
    ctx.equal("num_nodes x devices", nodes * devices, int(os.environ["SLURM_NTASKS"]), "SLURM_NTASKS (Lightning's world size)")
