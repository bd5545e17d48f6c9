"""Typed configuration, in four rooms: `schema` (dataclasses, enums), `derived` (values computed
from the fields: widths, windows, mesh shapes), `load` (Hydra compose of the packaged YAML +
overrides, one-line errors, YAML/dict round trip) and `validate` (every error at once, one line
each). A leaf package: it imports nothing else
from spmdgpt. Everything public is re-exported here; import from `spmdgpt.config`.
"""

from spmdgpt.config.load import (
    apply_overrides,
    load_config,
    load_run_config,
    model_config_from_dict,
    override_key,
    override_value,
    packaged_names,
    register_configs,
    to_dict,
    to_yaml,
)
from spmdgpt.config.derived import (
    ROPE_SCALING_FIELDS,
    ROPE_SCALING_PARAMS,
    ROPE_SCALING_DEFAULTS,
    expert_hidden,
    head_dim,
    kv_heads,
    layer_windows,
    logical_dim_sizes,
    mesh_axes,
    mesh_axes_of,
    mesh_sizes,
    mlp_hidden,
    moe_layer_pattern,
    moe_layers,
    resolve_mesh_shape,
)
from spmdgpt.config.schema import (
    AttentionImpl,
    CollectiveMatmul,
    ContextAttention,
    CheckpointConfig,
    LORA_TARGETS,
    LoraConfig,
    Config,
    ConfigError,
    DataConfig,
    DataFormat,
    DatasetConfig,
    DataSource,
    DistConfig,
    DType,
    GroupedMatmul,
    ManifoldSolver,
    MeshConfig,
    MlpType,
    ModelConfig,
    MoeConfig,
    MoeDispatch,
    Router,
    NormType,
    RopeScaling,
    OptimizerConfig,
    OptimizerName,
    Remat,
    RunConfig,
    Schedule,
    ShardingConfig,
    Split,
    TokenDtype,
    TokenizerKind,
    TrainConfig,
    dataset_configs,
    document_batches,
    freeze,
    preference_data,
)
from spmdgpt.config.validate import SECTIONS, profile_range, replan_points, validate, validate_dist

__all__ = [
    "apply_overrides", "AttentionImpl", "CollectiveMatmul", "ContextAttention", "CheckpointConfig", "Config", "LoraConfig", "LORA_TARGETS", "ConfigError", "DataConfig", "DataFormat", "DatasetConfig",
    "DataSource", "DistConfig", "DType", "GroupedMatmul", "ManifoldSolver", "MeshConfig", "MlpType", "ModelConfig", "MoeConfig", "MoeDispatch", "Router",
    "NormType", "OptimizerConfig", "ROPE_SCALING_FIELDS", "ROPE_SCALING_PARAMS", "ROPE_SCALING_DEFAULTS", "RopeScaling", "OptimizerName", "Remat", "RunConfig", "Schedule",
    "ShardingConfig", "Split", "TokenDtype", "TokenizerKind", "TrainConfig", "dataset_configs", "document_batches", "preference_data", "expert_hidden", "freeze", "head_dim", "kv_heads", "layer_windows", "load_config", "load_run_config",
    "logical_dim_sizes", "mesh_axes", "mesh_axes_of", "mesh_sizes", "mlp_hidden", "moe_layer_pattern", "moe_layers", "model_config_from_dict", "override_key", "override_value", "packaged_names", "profile_range", "register_configs", "replan_points",
    "resolve_mesh_shape", "SECTIONS",
    "to_dict", "to_yaml", "validate", "validate_dist",
]
