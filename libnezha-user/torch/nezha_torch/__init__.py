# SPDX-License-Identifier: LGPL-2.1-or-later
"""torch.distributed backend "nezha": import this module, then

    torch.distributed.init_process_group("nezha")

works under torchrun (env://) and with init_method= or store= arguments.
The rendezvous goes through torch's own store (no second port); every
operation runs on libnezha's progress engine.  See Documentation/pytorch.rst.
"""
import torch
import torch.distributed as dist

from . import _C

__all__ = ["ProcessGroupNezha", "library_version"]

ProcessGroupNezha = _C.ProcessGroupNezha
library_version = _C.library_version


def _create(store, rank, world_size, timeout):
    return _C.create_process_group(store, rank, world_size, timeout)


if not hasattr(dist.Backend, "NEZHA"):
    dist.Backend.register_backend("nezha", _create)
