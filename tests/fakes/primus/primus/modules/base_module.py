"""Stand-in for Primus's BaseModule: the module config, world and experiment paths."""


class BaseModule:
    def __init__(self, module_name, primus_config, module_rank, module_world_size, module_master_addr=None,
                 module_master_port=None):
        self.module_name = module_name
        self.module_config = primus_config.get_module_config(module_name)
        self.module_rank, self.module_world_size, self.module_local_rank = module_rank, module_world_size, 0
        self.exp_root_path = primus_config.exp_root_path
        self.exp_meta_info = primus_config.exp_meta_info
