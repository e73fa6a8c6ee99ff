"""``deepspeed.comm`` of the rehearsal's DeepSpeed stand-in (tests only): see ``deepspeed/__init__.py``."""


def init_distributed(dist_backend: str = "nccl", auto_mpi_discovery: bool = True, **kwargs) -> None:
    """DeepSpeed's NCCL world: the first GPU step of a rank; the rehearsal probe replaces this function."""
    raise RuntimeError(f"deepspeed.comm.init_distributed({dist_backend!r}): the rehearsal's DeepSpeed stand-in forms no world")
