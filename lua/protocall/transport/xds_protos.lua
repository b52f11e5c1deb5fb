--- The Envoy v3 messages the xDS client reads and writes, as a
-- wire-compatible subset of envoy-api's protos (only the messages and
-- fields transport/xds/ uses; every field number, type and package as
-- Envoy's, so real resources decode, their other fields kept as unknown
-- fields), loaded into a private pool of their own on first use.
-- spec/xds_spec.lua compares each field with the full protos.
local schema = require "protocall.schema"

local assert, ipairs = assert, ipairs

local M = {}

-- Each file as Envoy names it (one package per file), loaded in order.
M.FILES = {
  { "envoy/config/core/v3/subset.proto", [[
syntax = "proto3";
package envoy.config.core.v3;
import "google/protobuf/struct.proto";
import "envoy/type/v3/subset.proto";
message Locality { string region = 1; string zone = 2; string sub_zone = 3; }
message Node {
  string id = 1;
  string cluster = 2;
  google.protobuf.Struct metadata = 3;
  Locality locality = 4;
  string user_agent_name = 6;
  oneof user_agent_version_type { string user_agent_version = 7; }
  repeated string client_features = 10;
}
message SocketAddress {
  enum Protocol { TCP = 0; UDP = 1; }
  Protocol protocol = 1;
  string address = 2;
  oneof port_specifier { uint32 port_value = 3; string named_port = 4; }
}
message Address { oneof address { SocketAddress socket_address = 1; } }
enum HealthStatus { UNKNOWN = 0; HEALTHY = 1; UNHEALTHY = 2; DRAINING = 3; TIMEOUT = 4; DEGRADED = 5; }
enum RoutingPriority { DEFAULT = 0; HIGH = 1; }
message AggregatedConfigSource {}
message SelfConfigSource {}
message ConfigSource {
  oneof config_source_specifier { AggregatedConfigSource ads = 3; SelfConfigSource self = 5; }
}
message RuntimeFractionalPercent { envoy.type.v3.FractionalPercent default_value = 1; string runtime_key = 2; }
]] },
  { "envoy/service/discovery/v3/subset.proto", [[
syntax = "proto3";
package envoy.service.discovery.v3;
import "google/protobuf/any.proto";
import "google/rpc/status.proto";
import "envoy/config/core/v3/subset.proto";
message DiscoveryRequest {
  string version_info = 1;
  envoy.config.core.v3.Node node = 2;
  repeated string resource_names = 3;
  string type_url = 4;
  string response_nonce = 5;
  google.rpc.Status error_detail = 6;
}
message DiscoveryResponse {
  string version_info = 1;
  repeated google.protobuf.Any resources = 2;
  string type_url = 4;
  string nonce = 5;
}
service AggregatedDiscoveryService {
  rpc StreamAggregatedResources(stream DiscoveryRequest) returns (stream DiscoveryResponse);
}
]] },
  { "envoy/config/listener/v3/subset.proto", [[
syntax = "proto3";
package envoy.config.listener.v3;
import "google/protobuf/any.proto";
message ApiListener { google.protobuf.Any api_listener = 1; }
message Listener { string name = 1; ApiListener api_listener = 19; }
]] },
  { "envoy/config/route/v3/subset.proto", [[
syntax = "proto3";
package envoy.config.route.v3;
import "google/protobuf/duration.proto";
import "google/protobuf/wrappers.proto";
import "envoy/config/core/v3/subset.proto";
import "envoy/type/matcher/v3/subset.proto";
import "envoy/type/v3/subset.proto";
message HeaderMatcher {
  string name = 1;
  oneof header_match_specifier {
    string exact_match = 4;
    envoy.type.matcher.v3.RegexMatcher safe_regex_match = 11;
    envoy.type.v3.Int64Range range_match = 6;
    bool present_match = 7;
    string prefix_match = 9;
    string suffix_match = 10;
    string contains_match = 12;
    envoy.type.matcher.v3.StringMatcher string_match = 13;
  }
  bool invert_match = 8;
}
// only whether a route has any (gRFC A28: such a route is left out)
message QueryParameterMatcher { string name = 1; }
message RouteMatch {
  oneof path_specifier { string prefix = 1; string path = 2; envoy.type.matcher.v3.RegexMatcher safe_regex = 10; }
  google.protobuf.BoolValue case_sensitive = 4;
  envoy.config.core.v3.RuntimeFractionalPercent runtime_fraction = 9;
  repeated HeaderMatcher headers = 6;
  repeated QueryParameterMatcher query_parameters = 7;
}
message WeightedCluster {
  message ClusterWeight { string name = 1; google.protobuf.UInt32Value weight = 2; }
  repeated ClusterWeight clusters = 1;
}
message RetryPolicy {
  message RetryBackOff { google.protobuf.Duration base_interval = 1; google.protobuf.Duration max_interval = 2; }
  string retry_on = 1;
  google.protobuf.UInt32Value num_retries = 2;
  RetryBackOff retry_back_off = 8;
}
message RouteAction {
  // gRFC A42's hash policies: header (its regex_rewrite left out) and filter_state
  message HashPolicy {
    message Header { string header_name = 1; }
    message FilterState { string key = 1; }
    oneof policy_specifier { Header header = 1; FilterState filter_state = 6; }
    bool terminal = 4;
  }
  oneof cluster_specifier { string cluster = 1; WeightedCluster weighted_clusters = 3; }
  google.protobuf.Duration timeout = 8;
  RetryPolicy retry_policy = 9;
  repeated HashPolicy hash_policy = 15;
}
message Route { string name = 14; RouteMatch match = 1; oneof action { RouteAction route = 2; } }
message VirtualHost {
  string name = 1;
  repeated string domains = 2;
  repeated Route routes = 3;
  RetryPolicy retry_policy = 16;
}
message RouteConfiguration { string name = 1; repeated VirtualHost virtual_hosts = 2; }
]] },
  { "envoy/type/matcher/v3/subset.proto", [[
syntax = "proto3";
package envoy.type.matcher.v3;
message RegexMatcher { string regex = 2; }
message StringMatcher {
  oneof match_pattern {
    string exact = 1; string prefix = 2; string suffix = 3; RegexMatcher safe_regex = 5; string contains = 7;
  }
  bool ignore_case = 6;
}
]] },
  { "envoy/extensions/filters/network/http_connection_manager/v3/subset.proto", [[
syntax = "proto3";
package envoy.extensions.filters.network.http_connection_manager.v3;
import "envoy/config/core/v3/subset.proto";
import "envoy/config/route/v3/subset.proto";
message Rds { envoy.config.core.v3.ConfigSource config_source = 1; string route_config_name = 2; }
message HttpConnectionManager {
  oneof route_specifier { Rds rds = 3; envoy.config.route.v3.RouteConfiguration route_config = 4; }
}
]] },
  { "envoy/config/cluster/v3/subset.proto", [[
syntax = "proto3";
package envoy.config.cluster.v3;
import "google/protobuf/duration.proto";
import "google/protobuf/wrappers.proto";
import "envoy/config/core/v3/subset.proto";
message OutlierDetection {
  google.protobuf.Duration interval = 2;
  google.protobuf.Duration base_ejection_time = 3;
  google.protobuf.UInt32Value max_ejection_percent = 4;
  google.protobuf.UInt32Value enforcing_success_rate = 6;
  google.protobuf.UInt32Value success_rate_minimum_hosts = 7;
  google.protobuf.UInt32Value success_rate_request_volume = 8;
  google.protobuf.UInt32Value success_rate_stdev_factor = 9;
  google.protobuf.UInt32Value failure_percentage_threshold = 16;
  google.protobuf.UInt32Value enforcing_failure_percentage = 17;
  google.protobuf.UInt32Value failure_percentage_minimum_hosts = 19;
  google.protobuf.UInt32Value failure_percentage_request_volume = 20;
  google.protobuf.Duration max_ejection_time = 21;
}
message CircuitBreakers {
  message Thresholds {
    envoy.config.core.v3.RoutingPriority priority = 1;
    google.protobuf.UInt32Value max_requests = 4;
  }
  repeated Thresholds thresholds = 1;
}
message Cluster {
  enum DiscoveryType { STATIC = 0; STRICT_DNS = 1; LOGICAL_DNS = 2; EDS = 3; ORIGINAL_DST = 4; }
  enum LbPolicy {
    ROUND_ROBIN = 0; LEAST_REQUEST = 1; RING_HASH = 2; RANDOM = 3; MAGLEV = 5; CLUSTER_PROVIDED = 6;
    LOAD_BALANCING_POLICY_CONFIG = 7;
  }
  message EdsClusterConfig { envoy.config.core.v3.ConfigSource eds_config = 1; string service_name = 2; }
  message RingHashLbConfig {
    enum HashFunction { XX_HASH = 0; MURMUR_HASH_2 = 1; }
    google.protobuf.UInt64Value minimum_ring_size = 1;
    HashFunction hash_function = 3;
    google.protobuf.UInt64Value maximum_ring_size = 4;
  }
  message LeastRequestLbConfig { google.protobuf.UInt32Value choice_count = 1; }
  // only its name: an aggregate cluster's is envoy.clusters.aggregate (refused)
  message CustomClusterType { string name = 1; }
  string name = 1;
  oneof cluster_discovery_type { DiscoveryType type = 2; CustomClusterType cluster_type = 38; }
  EdsClusterConfig eds_cluster_config = 3;
  LbPolicy lb_policy = 6;
  CircuitBreakers circuit_breakers = 10;
  OutlierDetection outlier_detection = 19;
  oneof lb_config {
    RingHashLbConfig ring_hash_lb_config = 23;
    LeastRequestLbConfig least_request_lb_config = 37;
  }
}
]] },
  { "envoy/config/endpoint/v3/subset.proto", [[
syntax = "proto3";
package envoy.config.endpoint.v3;
import "google/protobuf/wrappers.proto";
import "envoy/config/core/v3/subset.proto";
message Endpoint { envoy.config.core.v3.Address address = 1; }
message LbEndpoint {
  oneof host_identifier { Endpoint endpoint = 1; }
  envoy.config.core.v3.HealthStatus health_status = 2;
  google.protobuf.UInt32Value load_balancing_weight = 4;
}
message LocalityLbEndpoints {
  envoy.config.core.v3.Locality locality = 1;
  repeated LbEndpoint lb_endpoints = 2;
  google.protobuf.UInt32Value load_balancing_weight = 3;
  uint32 priority = 5;
}
message ClusterLoadAssignment { string cluster_name = 1; repeated LocalityLbEndpoints endpoints = 2; }
]] },
  -- protocall's own: the bootstrap file read as proto3 JSON (gRFC A27's
  -- fields; others ignored), its node an Envoy Node; and a
  -- DiscoveryResponse whose resources are left as bytes, so that one that
  -- does not decode is that resource's problem alone (gRFC A46).
  { "protocall/xds/bootstrap.proto", [[
syntax = "proto3";
package protocall.xds;
import "google/protobuf/struct.proto";
import "envoy/config/core/v3/subset.proto";
message Bootstrap {
  message ChannelCreds { string type = 1; google.protobuf.Struct config = 2; }
  message Server {
    string server_uri = 1;
    repeated ChannelCreds channel_creds = 2;
    repeated string server_features = 3;
  }
  repeated Server xds_servers = 1;
  envoy.config.core.v3.Node node = 2;
}
// envoy.service.discovery.v3.DiscoveryResponse, each resource an undecoded google.protobuf.Any
message DiscoveryResponseEnvelope {
  string version_info = 1;
  repeated bytes resources = 2;
  string type_url = 4;
  string nonce = 5;
}
]] },
  -- envoy.type.v3 (FractionalPercent, Int64Range), loaded first
  { "envoy/type/v3/subset.proto", [[
syntax = "proto3";
package envoy.type.v3;
message FractionalPercent {
  enum DenominatorType { HUNDRED = 0; TEN_THOUSAND = 1; MILLION = 2; }
  uint32 numerator = 1;
  DenominatorType denominator = 2;
}
message Int64Range { int64 start = 1; int64 end = 2; }
]] },
}

-- Load order: a file after those it imports.
local ORDER = { 10, 1, 2, 3, 5, 4, 6, 7, 8, 9 }

local pool

--- pool = M.pool(): the private pool holding the subset (loaded once).
function M.pool()
  if pool == nil then
    local p = schema.pool()
    for _, i in ipairs(ORDER) do
      local f = M.FILES[i]
      assert(p:load(f[2], { name = f[1] }))
    end
    pool = p
  end
  return pool
end

--- T = M.type(full_name): a message type of the subset ("envoy.config.listener.v3.Listener").
function M.type(name)
  return assert(M.pool():type(name), name)
end

-- The resource types of the four xDS services, by short name.
M.TYPE_URL = {
  LDS = "type.googleapis.com/envoy.config.listener.v3.Listener",
  RDS = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
  CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster",
  EDS = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
}
M.HCM = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
M.ADS_PATH = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"

return M
