"""`mooncake.mooncake_config`: Mooncake's MooncakeConfig, the loader scripts and services
(mooncake_store_service, LMCache-style integrations) use to build a store's setup()
arguments from a JSON file or from MOONCAKE_* environment variables.

Same names, defaults, parsing and exceptions as Mooncake's module, so code written
against it runs unchanged:

  MooncakeConfig.from_file(path)   the JSON file; local_hostname, metadata_server and
                                   master_server_address are required (ValueError if a
                                   key is missing; OSError / json.JSONDecodeError from
                                   reading it).
  MooncakeConfig.load_from_env()   from_file($MOONCAKE_CONFIG_PATH) when that variable is
                                   set (even to ""); else MOONCAKE_MASTER is required
                                   (ValueError) and the other MOONCAKE_* variables fill in.

Defaults: global_segment_size 3355443200 (3.125 GiB), local_buffer_size 1 GiB, protocol
"tcp", device_name "", tenant_id "default", client_http_port 9300; on the environment
path also metadata_server "P2PHANDSHAKE" and local_hostname "localhost". Sizes are ints
or strings with a binary suffix (b, k/kb, m/mb, g/gb, t/tb; any case; fractions allowed,
e.g. "1.5gb"). Booleans accept true/false, 1/0, yes/no, on/off, enable/disable.

Every instance, however built, is checked: the protocol is lower-cased ("RDMA" ->
"rdma"), an unknown one is passed through with a warning (the transport layer decides;
Tide itself runs "tcp" and "rdma"), and an empty or non-string protocol, a negative size
or an empty required field is a ValueError.

Mooncake's setup() does not read this file or MOONCAKE_CONFIG_PATH (neither does Tide's):
a caller passes the values on, e.g.

    cfg = MooncakeConfig.load_from_env()
    store.setup({"local_hostname": cfg.local_hostname,
                 "metadata_server": cfg.metadata_server,
                 "global_segment_size": cfg.global_segment_size,
                 "local_buffer_size": cfg.local_buffer_size,
                 "protocol": cfg.protocol, "rdma_devices": cfg.device_name,
                 "master_server_addr": cfg.master_server_address})
"""
import json
import logging
import os
from dataclasses import dataclass
from typing import Optional

__all__ = ["MooncakeConfig", "DEFAULT_GLOBAL_SEGMENT_SIZE", "DEFAULT_LOCAL_BUFFER_SIZE"]

logger = logging.getLogger(__name__)

DEFAULT_GLOBAL_SEGMENT_SIZE = 3355443200  # 3.125 GiB, Mooncake's value
DEFAULT_LOCAL_BUFFER_SIZE = 1 << 30
DEFAULT_CLIENT_HTTP_PORT = 9300

# Two-letter suffixes are tried before their one-letter forms ("mb" before "b").
_UNITS = (("kb", 1 << 10), ("mb", 1 << 20), ("gb", 1 << 30), ("tb", 1 << 40),
          ("k", 1 << 10), ("m", 1 << 20), ("g", 1 << 30), ("t", 1 << 40), ("b", 1))

# What Mooncake's engines and store accept, depending on the build; only a hint for the
# warning below, never a gate.
_KNOWN_PROTOCOLS = frozenset((
    "tcp", "rdma", "efa", "nvmeof", "nvlink", "nvlink_intra", "musa", "hip", "barex",
    "cxl", "ascend", "ub", "ubshmem", "maca", "sunrise_link", "rpc_only"))

_REQUIRED = ("local_hostname", "metadata_server", "master_server_address")

_TRUE = frozenset(("true", "1", "yes", "on", "enable"))
_FALSE = frozenset(("false", "0", "no", "off", "disable"))


def _parse_segment_size(value):
    """Bytes from an int (taken as is) or a size string ("4096", "512mb", "1.5GB")."""
    if isinstance(value, int):
        return value
    if not isinstance(value, str):
        return int(value)
    text = value.strip().lower()
    if not text:
        raise ValueError("Invalid segment size: empty string")
    for suffix, scale in _UNITS:
        if text.endswith(suffix):
            number = text[:-len(suffix)].strip()
            if not number:
                raise ValueError(f"Invalid segment size: missing number before '{suffix}'")
            return int(float(number) * scale)
    return int(float(text))


def _parse_bool(value):
    """A config boolean given as a bool, a number or a word; ValueError for other words
    (bool("false") would be True)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return bool(value)
    if value is None:
        return False
    word = str(value).strip().lower()
    if not word:
        return False
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise ValueError(f"Invalid boolean value: {value!r}")


@dataclass
class MooncakeConfig:
    """A store client's configuration (see the module docstring).

    local_hostname, metadata_server, master_server_address: non-empty strings.
    global_segment_size, local_buffer_size: bytes, not negative.
    protocol: transport name, lower-cased on construction.
    device_name: RDMA device list for rdma ("mlx5_0,mlx5_1"; "" or "auto-discovery":
        every device), setup()'s rdma_devices.
    enable_ssd_offload, ssd_offload_path, tenant_id, enable_client_http_server,
    client_http_port: carried for Mooncake's setup() keys of the same names.
    """

    local_hostname: str
    metadata_server: str
    global_segment_size: int
    local_buffer_size: int
    protocol: str
    device_name: Optional[str]
    master_server_address: str
    enable_ssd_offload: bool = False
    ssd_offload_path: str = ""
    tenant_id: str = "default"
    enable_client_http_server: bool = False
    client_http_port: int = DEFAULT_CLIENT_HTTP_PORT

    def __post_init__(self):
        if not isinstance(self.protocol, str) or not self.protocol.strip():
            raise ValueError(f"Invalid protocol: {self.protocol!r}. Protocol must be a "
                             "non-empty string, e.g. 'tcp' or 'rdma'.")
        self.protocol = self.protocol.strip().lower()
        if self.protocol not in _KNOWN_PROTOCOLS:
            logger.warning("Unrecognised protocol %r; it is passed on unchanged and the "
                           "transport decides (known: %s).", self.protocol,
                           ", ".join(sorted(_KNOWN_PROTOCOLS)))
        for name in ("global_segment_size", "local_buffer_size"):
            size = getattr(self, name)
            if size < 0:
                raise ValueError(f"Invalid {name}: {size}. Size must be non-negative.")
        for name in _REQUIRED:
            text = getattr(self, name)
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"Config field {name!r} must be a non-empty string, "
                                 f"got {text!r}.")

    @staticmethod
    def from_file(file_path):
        """The configuration in the JSON file at file_path."""
        with open(file_path) as f:
            doc = json.load(f)
        for name in _REQUIRED:
            if name not in doc:
                raise ValueError(f"Missing required config field: {name}")
        offload_path = doc.get("ssd_offload_path")
        tenant = doc.get("tenant_id")
        return MooncakeConfig(
            local_hostname=doc.get("local_hostname"),
            metadata_server=doc.get("metadata_server"),
            global_segment_size=_parse_segment_size(
                doc.get("global_segment_size", DEFAULT_GLOBAL_SEGMENT_SIZE)),
            local_buffer_size=_parse_segment_size(
                doc.get("local_buffer_size", DEFAULT_LOCAL_BUFFER_SIZE)),
            protocol=doc.get("protocol", "tcp"),
            device_name=doc.get("device_name", ""),
            master_server_address=doc.get("master_server_address"),
            enable_ssd_offload=_parse_bool(doc.get("enable_ssd_offload", False)),
            ssd_offload_path="" if offload_path is None else str(offload_path),
            tenant_id="default" if tenant is None else str(tenant),
            enable_client_http_server=_parse_bool(
                doc.get("enable_client_http_server", False)),
            client_http_port=int(doc.get("client_http_port", DEFAULT_CLIENT_HTTP_PORT)),
        )

    @staticmethod
    def load_from_env():
        """from_file($MOONCAKE_CONFIG_PATH) when set; else the MOONCAKE_* variables
        (MOONCAKE_MASTER required): MOONCAKE_LOCAL_HOSTNAME, MOONCAKE_TE_META_DATA_SERVER,
        MOONCAKE_GLOBAL_SEGMENT_SIZE, MOONCAKE_LOCAL_BUFFER_SIZE, MOONCAKE_PROTOCOL,
        MOONCAKE_DEVICE, MOONCAKE_OFFLOAD_ENABLED, MOONCAKE_OFFLOAD_FILE_STORAGE_PATH,
        MOONCAKE_TENANT_ID, MOONCAKE_ENABLE_CLIENT_HTTP_SERVER, MOONCAKE_CLIENT_HTTP_PORT."""
        env = os.environ
        path = env.get("MOONCAKE_CONFIG_PATH")
        if path is not None:
            return MooncakeConfig.from_file(path)
        master = env.get("MOONCAKE_MASTER")
        if not master:
            raise ValueError("Neither the environment variable 'MOONCAKE_CONFIG_PATH' nor "
                             "'MOONCAKE_MASTER' is set.")
        return MooncakeConfig(
            local_hostname=env.get("MOONCAKE_LOCAL_HOSTNAME", "localhost"),
            metadata_server=env.get("MOONCAKE_TE_META_DATA_SERVER", "P2PHANDSHAKE"),
            global_segment_size=_parse_segment_size(
                env.get("MOONCAKE_GLOBAL_SEGMENT_SIZE", DEFAULT_GLOBAL_SEGMENT_SIZE)),
            local_buffer_size=_parse_segment_size(
                env.get("MOONCAKE_LOCAL_BUFFER_SIZE", DEFAULT_LOCAL_BUFFER_SIZE)),
            protocol=env.get("MOONCAKE_PROTOCOL", "tcp"),
            device_name=env.get("MOONCAKE_DEVICE", ""),
            master_server_address=master,
            enable_ssd_offload=_parse_bool(env.get("MOONCAKE_OFFLOAD_ENABLED", "false")),
            ssd_offload_path=env.get("MOONCAKE_OFFLOAD_FILE_STORAGE_PATH", ""),
            tenant_id=env.get("MOONCAKE_TENANT_ID", "default"),
            enable_client_http_server=_parse_bool(
                env.get("MOONCAKE_ENABLE_CLIENT_HTTP_SERVER", "false")),
            client_http_port=int(env.get("MOONCAKE_CLIENT_HTTP_PORT",
                                         DEFAULT_CLIENT_HTTP_PORT)),
        )
