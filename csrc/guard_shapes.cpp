// guard_shapes.cpp — symbolic-shape guards: one relation over sizes, strides, storage offsets
// of tensors in slots and Python ints in slots (`s0 >= 2`, `s0 == s1`, `L['x'].stride()[0] ==
// s1`), evaluated by a small postfix program with no Python calls.
//
// A relation reads its operands first (`reads`: slot, what, dim), then runs `program`, a flat
// int64 array of opcodes, some followed by one operand:
//   READ k | CONST c | ADD SUB MUL FLOORDIV MOD NEG ABS MAX MIN POW | EQ NE LT LE GT GE | AND OR
//   NOT
// Integer arithmetic is Python's (floor division and modulo round toward minus infinity); a
// division by zero, an overflow, a slot that holds no tensor (or no int), or a missing dimension
// fails the guard. The program is validated once, at construction (stack depth, operands).
#include <pybind11/pybind11.h>

#include <stdexcept>

#include "guard_leaves.h"
#include "torch_compat.h"

namespace xc {

namespace {

enum Op : int64_t {
  kRead = 0,
  kConst = 1,
  kAdd = 2,
  kSub = 3,
  kMul = 4,
  kFloorDiv = 5,
  kMod = 6,
  kNeg = 7,
  kAbs = 8,
  kMax = 9,
  kMin = 10,
  kPow = 11,
  kEq = 12,
  kNe = 13,
  kLt = 14,
  kLe = 15,
  kGt = 16,
  kGe = 17,
  kAnd = 18,
  kOr = 19,
  kNot = 20,
  kNumOps = 21,
};

constexpr int kMaxStack = 64;

int arity(int64_t op) {
  switch (op) {
    case kRead:
    case kConst:
      return 0;
    case kNeg:
    case kAbs:
    case kNot:
      return 1;
    default:
      return 2;
  }
}

bool floor_div(int64_t a, int64_t b, int64_t* out) {
  if (b == 0 || (a == INT64_MIN && b == -1)) return false;
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
  *out = q;
  return true;
}

bool py_mod(int64_t a, int64_t b, int64_t* out) {
  if (b == 0) return false;
  if (a == INT64_MIN && b == -1) {
    *out = 0;
    return true;
  }
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  *out = r;
  return true;
}

bool int_pow(int64_t base, int64_t exp, int64_t* out) {
  if (exp < 0) return false;
  int64_t r = 1;
  while (exp-- > 0) {
    if (__builtin_mul_overflow(r, base, &r)) return false;
  }
  *out = r;
  return true;
}

class ShapeCheck final : public RootLeaf {
 public:
  ShapeCheck(std::vector<ShapeRead> reads, std::vector<int64_t> program, int n_slots,
             std::string desc)
      : RootLeaf(std::move(desc)), reads_(std::move(reads)), program_(std::move(program)) {
    if (reads_.size() > kMaxStack) throw std::invalid_argument("shape_check: too many reads");
    for (const ShapeRead& r : reads_) {
      if (r.slot < 0 || r.slot >= n_slots)
        throw std::out_of_range("shape_check: slot out of range");
      if (r.what < 0 || r.what > kIntValue || r.dim < 0) {
        throw std::invalid_argument("shape_check: bad read");
      }
    }
    int depth = 0;
    for (size_t pc = 0; pc < program_.size(); pc++) {
      const int64_t op = program_[pc];
      if (op < 0 || op >= kNumOps) throw std::invalid_argument("shape_check: bad opcode");
      if (op == kRead || op == kConst) {
        if (++pc >= program_.size()) throw std::invalid_argument("shape_check: missing operand");
        if (op == kRead && (program_[pc] < 0 || program_[pc] >= (int64_t)reads_.size())) {
          throw std::invalid_argument("shape_check: read index out of range");
        }
        if (++depth > kMaxStack) throw std::invalid_argument("shape_check: program too deep");
        continue;
      }
      depth -= arity(op) - 1;
      if (depth < 1) throw std::invalid_argument("shape_check: stack underflow");
    }
    if (depth != 1) throw std::invalid_argument("shape_check: program must leave one value");
  }

  bool needs_slots() const override { return true; }

  bool check(PyObject* const* slots) override {
    int64_t vals[kMaxStack];
    const size_t n = reads_.size();
    for (size_t i = 0; i < n; i++) {
      if (!read(reads_[i], slots[reads_[i].slot], &vals[i])) return false;
    }
    int64_t stack[kMaxStack];
    int sp = 0;
    const int64_t* p = program_.data();
    const int64_t* end = p + program_.size();
    while (p < end) {
      const int64_t op = *p++;
      if (op == kRead) {
        stack[sp++] = vals[*p++];
        continue;
      }
      if (op == kConst) {
        stack[sp++] = *p++;
        continue;
      }
      if (arity(op) == 1) {
        int64_t& a = stack[sp - 1];
        if (op == kNeg) {
          if (a == INT64_MIN) return false;
          a = -a;
        } else if (op == kAbs) {
          if (a == INT64_MIN) return false;
          a = a < 0 ? -a : a;
        } else {
          a = !a;
        }
        continue;
      }
      const int64_t b = stack[--sp];
      int64_t& a = stack[sp - 1];
      switch (op) {
        case kAdd:
          if (__builtin_add_overflow(a, b, &a)) return false;
          break;
        case kSub:
          if (__builtin_sub_overflow(a, b, &a)) return false;
          break;
        case kMul:
          if (__builtin_mul_overflow(a, b, &a)) return false;
          break;
        case kFloorDiv:
          if (!floor_div(a, b, &a)) return false;
          break;
        case kMod:
          if (!py_mod(a, b, &a)) return false;
          break;
        case kMax:
          a = a > b ? a : b;
          break;
        case kMin:
          a = a < b ? a : b;
          break;
        case kPow:
          if (!int_pow(a, b, &a)) return false;
          break;
        case kEq:
          a = a == b;
          break;
        case kNe:
          a = a != b;
          break;
        case kLt:
          a = a < b;
          break;
        case kLe:
          a = a <= b;
          break;
        case kGt:
          a = a > b;
          break;
        case kGe:
          a = a >= b;
          break;
        case kAnd:
          a = a && b;
          break;
        case kOr:
          a = a || b;
          break;
        default:
          return false;
      }
    }
    return stack[0] != 0;
  }

 private:
  static bool read(const ShapeRead& r, PyObject* v, int64_t* out) {
    if (v == nullptr) return false;
    if (r.what == kIntValue) {
      if (!PyLong_CheckExact(v)) return false;
      int overflow = 0;
      long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
      if (overflow != 0 || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return false;
      }
      *out = x;
      return true;
    }
    if (!tc::is_tensor(v)) return false;
    AtenTensorHandle h = tc::handle(v);
    if (r.what == kStorageOffset) return aoti_torch_get_storage_offset(h, out) == 0;
    int64_t dim = 0;
    int64_t* p = nullptr;
    if (aoti_torch_get_dim(h, &dim) != 0 || r.dim >= dim) return false;
    if ((r.what == kSize ? aoti_torch_get_sizes(h, &p) : aoti_torch_get_strides(h, &p)) != 0) {
      return false;
    }
    *out = p[r.dim];
    return true;
  }

  std::vector<ShapeRead> reads_;
  std::vector<int64_t> program_;
};

}  // namespace

std::unique_ptr<RootLeaf> make_shape_check(std::vector<ShapeRead> reads,
                                           std::vector<int64_t> program, int n_slots,
                                           std::string desc) {
  return std::make_unique<ShapeCheck>(std::move(reads), std::move(program), n_slots,
                                      std::move(desc));
}

}  // namespace xc
