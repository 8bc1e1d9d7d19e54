//===- StepAttrs.cpp - step dialect attributes ----------------------------===//

#include "stepc/Dialect/Step/IR/StepAttrs.h"
#include "stepc/Dialect/Step/IR/StepDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace mlir;
using namespace stepc::step;

#include "stepc/Dialect/Step/IR/StepEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "stepc/Dialect/Step/IR/StepAttrs.cpp.inc"

void StepDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "stepc/Dialect/Step/IR/StepAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// ParamAttr
//===----------------------------------------------------------------------===//

/// The shortest decimal form of `value` that reads back exactly, always with
/// a '.' so that MLIR's lexer takes it for a float.
static std::string formatExactFloat(double value) {
  char buffer[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value)
      break;
  }
  std::string text = buffer;
  if (text.find('.') == std::string::npos) {
    size_t exponent = text.find('e');
    text.insert(exponent == std::string::npos ? text.size() : exponent, ".0");
  }
  return text;
}

// Syntax: #step.param<"name", zeros | ones | normal(std) |
//                             scaled_normal(std, layers) [, block N] [, frozen]
//                             [, weight_decay W] [, lr_scale S]>
Attribute ParamAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  std::string name;
  if (parser.parseLess() || parser.parseString(&name) || parser.parseComma())
    return {};
  SMLoc kindLoc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return {};
  std::optional<InitKind> kind = symbolizeInitKind(keyword);
  if (!kind) {
    parser.emitError(kindLoc, "unknown initialiser '")
        << keyword << "', expected zeros, ones, normal or scaled_normal";
    return {};
  }
  double std = 0.0;
  int64_t layers = 0;
  if (*kind == InitKind::Normal || *kind == InitKind::ScaledNormal) {
    if (parser.parseLParen() || parser.parseFloat(std))
      return {};
    if (*kind == InitKind::ScaledNormal &&
        (parser.parseComma() || parser.parseInteger(layers)))
      return {};
    if (parser.parseRParen())
      return {};
  }
  // Then, in this order and each optional: `block N`, `frozen`,
  // `weight_decay W`, `lr_scale S`.
  int64_t block = -1;
  bool frozen = false;
  double weightDecay = -1.0, lrScale = 1.0;
  const char *markers[] = {"block", "frozen", "weight_decay", "lr_scale"};
  int next = 0; // the first marker that may still come
  while (succeeded(parser.parseOptionalComma())) {
    SMLoc markerLoc = parser.getCurrentLocation();
    StringRef marker;
    if (parser.parseKeyword(&marker))
      return {};
    int which = next;
    while (which < 4 && marker != markers[which])
      ++which;
    if (which == 4) {
      parser.emitError(markerLoc, "unexpected '")
          << marker << "': after the initialiser come, each optional and in this order, "
                       "'block N', 'frozen', 'weight_decay W', 'lr_scale S'";
      return {};
    }
    next = which + 1;
    SMLoc valueLoc = parser.getCurrentLocation();
    if ((which == 0 && parser.parseInteger(block)) ||
        (which == 2 && parser.parseFloat(weightDecay)) ||
        (which == 3 && parser.parseFloat(lrScale)))
      return {};
    // (-1 stands for "none" inside; written, a block and a decay are >= 0.)
    if (which == 0 && block < 0) {
      parser.emitError(valueLoc, "expects a block index >= 0, got ") << block;
      return {};
    }
    if (which == 2 && !(weightDecay >= 0.0)) {
      parser.emitError(valueLoc, "expects a finite weight_decay >= 0, got ")
          << formatExactFloat(weightDecay);
      return {};
    }
    if (which == 1)
      frozen = true;
  }
  if (parser.parseGreater())
    return {};
  return parser.getChecked<ParamAttr>(loc, parser.getContext(), name, *kind,
                                      llvm::APFloat(std), layers, block, frozen,
                                      llvm::APFloat(weightDecay), llvm::APFloat(lrScale));
}

void ParamAttr::print(AsmPrinter &printer) const {
  printer << "<";
  printer.printString(getName());
  printer << ", " << stringifyInitKind(getInit());
  switch (getInit()) {
  case InitKind::Zeros:
  case InitKind::Ones:
    break;
  case InitKind::Normal:
    printer << "(" << formatExactFloat(getStd().convertToDouble()) << ")";
    break;
  case InitKind::ScaledNormal:
    printer << "(" << formatExactFloat(getStd().convertToDouble()) << ", "
            << getLayers() << ")";
    break;
  }
  if (hasBlock())
    printer << ", block " << getBlock();
  if (getFrozen())
    printer << ", frozen";
  if (hasWeightDecay())
    printer << ", weight_decay " << formatExactFloat(getWeightDecayValue());
  if (getLrScaleValue() != 1.0)
    printer << ", lr_scale " << formatExactFloat(getLrScaleValue());
  printer << ">";
}

LogicalResult
ParamAttr::verify(llvm::function_ref<InFlightDiagnostic()> emitError,
                  StringRef name, InitKind init, llvm::APFloat std,
                  int64_t layers, int64_t block, bool frozen, llvm::APFloat weightDecayValue,
                  llvm::APFloat lrScaleValue) {
  const double weightDecay = weightDecayValue.convertToDouble();
  const double lrScale = lrScaleValue.convertToDouble();
  if (name.empty())
    return emitError() << "expects a non-empty parameter name";
  if (!isPlainName(name))
    return emitError() << "expects a parameter name that can be a file name (at most 200 "
                          "characters, no '/', '\\' or control characters, not '.' or '..'), "
                          "got \"" << name << "\"";
  bool drawsRandom = init == InitKind::Normal || init == InitKind::ScaledNormal;
  double stdValue = std.convertToDouble();
  if (drawsRandom && !(stdValue > 0.0 && std::isfinite(stdValue)))
    return emitError() << "expects a positive finite standard deviation, got "
                       << formatExactFloat(stdValue);
  if (init == InitKind::ScaledNormal && layers < 1)
    return emitError() << "expects scaled_normal layers >= 1, got " << layers;
  if (block < -1)
    return emitError() << "expects a block index >= 0, got " << block;
  if (!(weightDecay >= 0.0 || weightDecay == -1.0) || !std::isfinite(weightDecay))
    return emitError() << "expects a finite weight_decay >= 0, got "
                       << formatExactFloat(weightDecay);
  if (!(lrScale >= 0.0) || !std::isfinite(lrScale))
    return emitError() << "expects a finite lr_scale >= 0, got " << formatExactFloat(lrScale);
  return success();
}

ParamAttr ParamAttr::withBlock(int64_t block) const {
  return ParamAttr::get(getContext(), getName(), getInit(), getStd(), getLayers(), block,
                        getFrozen(), getWeightDecay(), getLrScale());
}

ParamAttr stepc::step::getTrainedParam(FunctionOpInterface function, unsigned i) {
  auto param = function.getArgAttrOfType<ParamAttr>(i, StepDialect::kParamAttrName);
  return param && param.isTrained() ? param : ParamAttr();
}

ParamAttr ParamAttr::withFrozen(bool frozen) const {
  return ParamAttr::get(getContext(), getName(), getInit(), getStd(), getLayers(), getBlock(),
                        frozen, getWeightDecay(), getLrScale());
}

double ParamAttr::getEffectiveStd() const {
  switch (getInit()) {
  case InitKind::Zeros:
  case InitKind::Ones:
    return 0.0;
  case InitKind::Normal:
    return getStd().convertToDouble();
  case InitKind::ScaledNormal:
    return getStd().convertToDouble() /
           std::sqrt(2.0 * static_cast<double>(getLayers()));
  }
  return 0.0;
}

//===----------------------------------------------------------------------===//
// StateAttr
//===----------------------------------------------------------------------===//

LogicalResult StateAttr::verify(llvm::function_ref<InFlightDiagnostic()> emitError,
                                Moment moment, StringRef param) {
  if (param.empty())
    return emitError() << "expects the name of the parameter the state belongs to";
  return success();
}

std::string StateAttr::getQualifiedName() const {
  return (stringifyMoment(getMoment()) + "." + getParam()).str();
}

//===----------------------------------------------------------------------===//
// ResultAttr
//===----------------------------------------------------------------------===//

bool ResultAttr::roleHasName(Role role) {
  return role == Role::Grad || role == Role::Param || role == Role::Moment ||
         role == Role::Output || role == Role::Metric;
}

// Syntax: #step.result<loss | grad_norm | logits>
//         #step.result<grad | param | exp_avg | exp_avg_sq | output | metric, "name">
Attribute ResultAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseLess() || parser.parseKeyword(&keyword))
    return {};
  Role role;
  Moment moment = Moment::ExpAvg;
  if (std::optional<Moment> m = symbolizeMoment(keyword)) {
    role = Role::Moment;
    moment = *m;
  } else if (std::optional<Role> r = symbolizeRole(keyword); r && *r != Role::Moment) {
    role = *r;
  } else {
    parser.emitError(loc, "unknown result role '")
        << keyword
        << "', expected loss, grad_norm, logits, grad, param, exp_avg, exp_avg_sq, output or "
           "metric";
    return {};
  }
  std::string name;
  if (roleHasName(role) && (parser.parseComma() || parser.parseString(&name)))
    return {};
  if (parser.parseGreater())
    return {};
  return parser.getChecked<ResultAttr>(loc, parser.getContext(), role, moment, name);
}

void ResultAttr::print(AsmPrinter &printer) const {
  printer << "<"
          << (getRole() == Role::Moment ? stringifyMoment(getMoment()) : stringifyRole(getRole()));
  if (roleHasName(getRole())) {
    printer << ", ";
    printer.printString(getName());
  }
  printer << ">";
}

LogicalResult ResultAttr::verify(llvm::function_ref<InFlightDiagnostic()> emitError, Role role,
                                 Moment moment, StringRef name) {
  if (roleHasName(role) && name.empty())
    return emitError() << "expects a non-empty name for result role '" << stringifyRole(role)
                       << "'";
  if (!roleHasName(role) && !name.empty())
    return emitError() << "expects no name for result role '" << stringifyRole(role) << "'";
  if (roleHasName(role) && !isPlainName(name))
    return emitError() << "expects a result name that can be a file name (at most 200 "
                          "characters, no '/', '\\' or control characters, not '.' or '..'), "
                          "got \"" << name << "\"";
  return success();
}

std::string ResultAttr::getQualifiedName() const {
  if (getRole() == Role::Moment)
    return (stringifyMoment(getMoment()) + "." + getName()).str();
  if (roleHasName(getRole()))
    return (stringifyRole(getRole()) + "." + getName()).str();
  return stringifyRole(getRole()).str();
}
