//===- Annotations.cpp - ONNX 1.18 multi-device annotations as attributes ===//
//
// Kept for later passes (cleave-annotate-sharding reads the sharding specs):
// the model's `configuration` and each node's `device_configurations`.
//
//===----------------------------------------------------------------------===//

#include "compiler/onnx/Importer.h"

using namespace mlir;

namespace cleave {

ArrayAttr configurationsAttr(Builder &builder, const onnx::ModelProto &model) {
  SmallVector<Attribute> configs;
  for (const auto &config : model.configuration()) {
    configs.push_back(builder.getDictionaryAttr(
        {builder.getNamedAttr("name", builder.getStringAttr(config.name())),
         builder.getNamedAttr("num_devices", builder.getI64IntegerAttr(config.num_devices())),
         builder.getNamedAttr("devices",
                              builder.getStrArrayAttr(SmallVector<StringRef>(
                                  config.device().begin(), config.device().end())))}));
  }
  return configs.empty() ? ArrayAttr() : builder.getArrayAttr(configs);
}

ArrayAttr deviceConfigAttr(Builder &builder, const onnx::NodeProto &node) {
  SmallVector<Attribute> configs;
  for (const auto &config : node.device_configurations()) {
    SmallVector<Attribute> specs;
    for (const auto &spec : config.sharding_spec()) {
      SmallVector<Attribute> dims;
      for (const auto &dim : spec.sharded_dim()) {
        SmallVector<int64_t> shards;
        for (const auto &simple : dim.simple_sharding())
          shards.push_back(simple.num_shards());
        dims.push_back(builder.getDictionaryAttr(
            {builder.getNamedAttr("axis", builder.getI64IntegerAttr(dim.axis())),
             builder.getNamedAttr("num_shards", builder.getI64ArrayAttr(shards))}));
      }
      SmallVector<NamedAttribute> groups;
      for (const auto &entry : spec.index_to_device_group_map())
        groups.push_back(builder.getNamedAttr(
            std::to_string(entry.key()),
            builder.getI64ArrayAttr(SmallVector<int64_t>(entry.value().begin(),
                                                         entry.value().end()))));
      specs.push_back(builder.getDictionaryAttr(
          {builder.getNamedAttr("tensor", builder.getStringAttr(spec.tensor_name())),
           builder.getNamedAttr("devices",
                                builder.getI64ArrayAttr(SmallVector<int64_t>(
                                    spec.device().begin(), spec.device().end()))),
           builder.getNamedAttr("device_groups", builder.getDictionaryAttr(groups)),
           builder.getNamedAttr("sharded_dims", builder.getArrayAttr(dims))}));
    }
    SmallVector<NamedAttribute> entries{
        builder.getNamedAttr("configuration", builder.getStringAttr(config.configuration_id())),
        builder.getNamedAttr("sharding", builder.getArrayAttr(specs))};
    if (config.has_pipeline_stage())
      entries.push_back(builder.getNamedAttr(
          "pipeline_stage", builder.getI64IntegerAttr(config.pipeline_stage())));
    configs.push_back(builder.getDictionaryAttr(entries));
  }
  return configs.empty() ? ArrayAttr() : builder.getArrayAttr(configs);
}

} // namespace cleave
