"""Stand-in for Primus's ROCm checks (none apply to tprimat's dense models)."""


def validate_args_on_rocm(args):
    return args
