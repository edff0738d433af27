"""Stand-in scheduler: linear warm-up from 0, then cosine/linear decay to min_lr, counted in samples."""

import math

from megatron.training.global_vars import get_args


class _Scheduler:
    def __init__(self, optimizer, args):
        self.optimizer, self.args, self.num_steps = optimizer, args, 0
        self.step(0)

    def step(self, increment):
        self.num_steps += increment
        args = self.args
        warmup = args.lr_warmup_iters * args.global_batch_size
        decay = args.lr_decay_iters * args.global_batch_size
        if warmup and self.num_steps <= warmup:
            lr = args.lr * self.num_steps / warmup
        elif args.lr_decay_style == "constant":
            lr = args.lr
        else:
            ratio = min(1.0, (self.num_steps - warmup) / (decay - warmup))
            coeff = 0.5 * (1 + math.cos(math.pi * ratio)) if args.lr_decay_style == "cosine" else 1 - ratio
            lr = args.min_lr + coeff * (args.lr - args.min_lr)
        for group in self.optimizer.param_groups:
            group["lr"] = lr


def get_optimizer_param_scheduler(optimizer):
    return _Scheduler(optimizer, get_args())
