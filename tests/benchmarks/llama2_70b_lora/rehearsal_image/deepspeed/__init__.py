"""A stand-in for DeepSpeed 0.13.2 in llama2_70b_lora's rehearsal image (tests only; the real image pip-installs
deepspeed==0.13.2 from the reference's requirements.txt, which does not import with this machine's torch 2.13).

It holds only what ``accelerate launch`` 0.27.2 checks before it starts the ranks (``utils/imports.py``:
``is_deepspeed_available`` finds this package and its ``deepspeed-0.13.2.dist-info``), and the one call the ranks
make before their first GPU step (``accelerate/state.py``: ``deepspeed.comm.init_distributed``, NCCL), which the
rehearsal probe takes over. Anything else is a GPU step and fails loudly.
"""

__version__ = "0.13.2"


def __getattr__(name: str):
    raise AttributeError(f"deepspeed.{name}: the rehearsal's DeepSpeed stand-in stops before the first GPU step")
