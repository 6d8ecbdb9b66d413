// gRPC server reflection v1 (grpc.reflection.v1.ServerReflection), beside gRPC's own v1alpha
// plugin: Debian's gRPC 1.51 serves only v1alpha, and current clients (grpcurl, grpc_cli,
// Postman) ask v1 first. Answers from the process's generated descriptor pool, as the
// v1alpha service does: list_services (the names given at construction), file_by_filename,
// file_containing_symbol, file_containing_extension, all_extension_numbers_of_type; each
// file answer carries the file and the dependencies not yet sent on that stream.
#pragma once

#include <string>
#include <vector>

#include "proto/reflection_v1.grpc.pb.h"

namespace dpu::ctl {

class ReflectionV1Service final : public grpc::reflection::v1::ServerReflection::Service {
 public:
  explicit ReflectionV1Service(std::vector<std::string> services)
      : services_(std::move(services)) {}

  grpc::Status ServerReflectionInfo(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<grpc::reflection::v1::ServerReflectionResponse,
                               grpc::reflection::v1::ServerReflectionRequest>* stream) override;

 private:
  std::vector<std::string> services_;
};

}  // namespace dpu::ctl
