#include "control/api/reflection_v1.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>

#include <set>

namespace dpu::ctl {

namespace rv1 = grpc::reflection::v1;
using google::protobuf::DescriptorPool;
using google::protobuf::FileDescriptor;

namespace {

// The file and its dependencies (depth first, dependencies before dependents), leaving out
// those already sent on this stream.
void addFile(const FileDescriptor* f, std::set<std::string>* sent,
             rv1::FileDescriptorResponse* out) {
  if (f == nullptr || !sent->insert(f->name()).second) return;
  for (int i = 0; i < f->dependency_count(); ++i) addFile(f->dependency(i), sent, out);
  google::protobuf::FileDescriptorProto p;
  f->CopyTo(&p);
  p.SerializeToString(out->add_file_descriptor_proto());
}

void notFound(rv1::ServerReflectionResponse* r, const std::string& what) {
  r->mutable_error_response()->set_error_code(static_cast<int>(grpc::StatusCode::NOT_FOUND));
  r->mutable_error_response()->set_error_message(what);
}

}  // namespace

grpc::Status ReflectionV1Service::ServerReflectionInfo(
    grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<rv1::ServerReflectionResponse, rv1::ServerReflectionRequest>*
        stream) {
  const DescriptorPool* pool = DescriptorPool::generated_pool();
  std::set<std::string> sent;  // files already sent on this stream
  rv1::ServerReflectionRequest req;
  while (!ctx->IsCancelled() && stream->Read(&req)) {
    rv1::ServerReflectionResponse r;
    r.set_valid_host(req.host());
    *r.mutable_original_request() = req;
    switch (req.message_request_case()) {
      case rv1::ServerReflectionRequest::kListServices:
        for (const auto& s : services_) {
          r.mutable_list_services_response()->add_service()->set_name(s);
        }
        break;
      case rv1::ServerReflectionRequest::kFileByFilename: {
        const FileDescriptor* f = pool->FindFileByName(req.file_by_filename());
        if (f == nullptr) {
          notFound(&r, "file not found: " + req.file_by_filename());
        } else {
          addFile(f, &sent, r.mutable_file_descriptor_response());
        }
        break;
      }
      case rv1::ServerReflectionRequest::kFileContainingSymbol: {
        const FileDescriptor* f = pool->FindFileContainingSymbol(req.file_containing_symbol());
        if (f == nullptr) {
          notFound(&r, "symbol not found: " + req.file_containing_symbol());
        } else {
          addFile(f, &sent, r.mutable_file_descriptor_response());
        }
        break;
      }
      case rv1::ServerReflectionRequest::kFileContainingExtension: {
        const auto& e = req.file_containing_extension();
        const auto* type = pool->FindMessageTypeByName(e.containing_type());
        const auto* ext =
            type != nullptr ? pool->FindExtensionByNumber(type, e.extension_number()) : nullptr;
        if (ext == nullptr) {
          notFound(&r, "extension not found: " + e.containing_type() + " " +
                           std::to_string(e.extension_number()));
        } else {
          addFile(ext->file(), &sent, r.mutable_file_descriptor_response());
        }
        break;
      }
      case rv1::ServerReflectionRequest::kAllExtensionNumbersOfType: {
        const auto* type = pool->FindMessageTypeByName(req.all_extension_numbers_of_type());
        if (type == nullptr) {
          notFound(&r, "type not found: " + req.all_extension_numbers_of_type());
        } else {
          std::vector<const google::protobuf::FieldDescriptor*> exts;
          pool->FindAllExtensions(type, &exts);
          auto* n = r.mutable_all_extension_numbers_response();
          n->set_base_type_name(type->full_name());
          for (const auto* x : exts) n->add_extension_number(x->number());
        }
        break;
      }
      default:  // every kind of request is answered above: this one names none
        r.mutable_error_response()->set_error_code(
            static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
        r.mutable_error_response()->set_error_message(
            "the request sets none of file_by_filename, file_containing_symbol, "
            "file_containing_extension, all_extension_numbers_of_type, list_services");
        break;
    }
    if (!stream->Write(r)) break;
  }
  return grpc::Status::OK;
}

}  // namespace dpu::ctl
