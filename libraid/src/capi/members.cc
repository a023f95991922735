// SPDX-License-Identifier: MIT
// The C API (uraid/uraid.h), part two: member handles (files, NBD URIs,
// memory, fault injection), arrays made from them, and member management
// (md's --fail, --remove, --add, --replace).

#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "capi/capi_internal.h"
#include "uraid/array.h"
#include "uraid/member.h"
#include "uraid/uraid.h"

namespace {

using uraid::capi::CopyMessage;
using uraid::capi::Guarded;
using uraid::capi::NullArgument;
using uraid::capi::OpenAndPublish;
using Members = std::vector<std::unique_ptr<uraid::Member>>;

absl::Status Publish(std::shared_ptr<uraid::Member> m, uraid_member** out,
                     std::shared_ptr<uraid::FaultyMember> faulty = nullptr) {
  auto h = std::make_unique<uraid_member>();
  h->member = std::move(m);
  h->faulty = std::move(faulty);
  *out = h.release();
  return absl::OkStatus();
}

// Handles -> members the array owns (a non-owning ShareMember each; NULL
// entries stay missing slots when `allow_missing`).
absl::Status Share(uraid_member* const* members, size_t n, bool allow_missing,
                   Members* out) {
  if (members == nullptr && n > 0) return NullArgument("members");
  for (size_t i = 0; i < n; ++i) {
    if (members[i] == nullptr) {
      if (!allow_missing) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "member %d is NULL (leave a missing member out instead)", i));
      }
      out->push_back(nullptr);
      continue;
    }
    out->push_back(uraid::ShareMember(members[i]->member));
  }
  return absl::OkStatus();
}

// uraid_create_from and uraid_assemble_from: the members shared from
// handles.
template <typename Options, typename COptions>
int FromHandles(bool allow_missing, uraid_member* const* members, size_t n,
                const COptions* options, uraid_array** out, char* err,
                size_t err_len) {
  return Guarded(err, err_len, [&]() -> absl::Status {
    if (out == nullptr) return NullArgument("out");
    *out = nullptr;
    return OpenAndPublish<Options>(
        options, out, [&](const uraid::MemberOptions&, Members* shared) {
          return Share(members, n, allow_missing, shared);
        });
  });
}

// uraid_fail and uraid_remove: `op` on the array's member called `name`.
int OnNamedMember(uraid_array* array, const char* name,
                  absl::Status (uraid::Array::*op)(const std::string&),
                  char* err, size_t err_len) {
  return Guarded(err, err_len, [&]() -> absl::Status {
    if (array == nullptr) return NullArgument("array");
    if (name == nullptr) return NullArgument("name");
    return (array->array.get()->*op)(name);
  });
}

// Applies `edit` to a fault injector's plan.
template <typename Edit>
int EditPlan(uraid_member* m, Edit&& edit) {
  if (m == nullptr || m->faulty == nullptr) return -EINVAL;
  try {
    std::lock_guard<std::mutex> lock(m->plan_mu);
    uraid::FaultPlan plan = m->faulty->plan();
    edit(plan);
    m->faulty->SetPlan(std::move(plan));
    return 0;
  } catch (...) {
    return -ENOMEM;
  }
}

}  // namespace

extern "C" {

int uraid_member_open(const char* spec, unsigned flags, uraid_member** out,
                      char* err, size_t err_len) {
  return Guarded(err, err_len, [&]() -> absl::Status {
    if (out == nullptr) return NullArgument("out");
    *out = nullptr;
    if (spec == nullptr) return NullArgument("spec");
    uraid::MemberOptions mo;
    mo.read_only = (flags & URAID_MEMBER_READ_ONLY) != 0;
    mo.direct = (flags & URAID_MEMBER_DIRECT) != 0;
    mo.lock = (flags & URAID_MEMBER_NO_LOCK) == 0;
    absl::StatusOr<std::unique_ptr<uraid::Member>> m =
        uraid::OpenMember(spec, mo);
    if (!m.ok()) return m.status();
    return Publish(std::shared_ptr<uraid::Member>(*std::move(m)), out);
  });
}

int uraid_member_new_memory(const char* name, uint64_t size, uraid_member** out,
                            char* err, size_t err_len) {
  return Guarded(err, err_len, [&]() -> absl::Status {
    if (out == nullptr) return NullArgument("out");
    *out = nullptr;
    return Publish(std::shared_ptr<uraid::Member>(uraid::NewMemoryMember(
                       name != nullptr ? name : "mem", size)),
                   out);
  });
}

int uraid_member_new_faulty(uraid_member* target, uraid_member** out, char* err,
                            size_t err_len) {
  return Guarded(err, err_len, [&]() -> absl::Status {
    if (out == nullptr) return NullArgument("out");
    *out = nullptr;
    if (target == nullptr) return NullArgument("target");
    auto f = std::make_shared<uraid::FaultyMember>(target->member);
    return Publish(f, out, f);
  });
}

int uraid_member_set_failed(uraid_member* member, int failed) {
  if (member == nullptr || member->faulty == nullptr) return -EINVAL;
  member->faulty->SetFailed(failed != 0);
  return 0;
}

int uraid_member_fail_after(uraid_member* member, uint64_t ios) {
  return EditPlan(member,
                  [&](uraid::FaultPlan& plan) { plan.fail_after_ios = ios; });
}

int uraid_member_fail_range(uraid_member* member, int op, uint64_t offset,
                            uint64_t len, uint64_t times) {
  if (op != URAID_OP_READ && op != URAID_OP_WRITE && op != URAID_OP_ANY) {
    return -EINVAL;
  }
  return EditPlan(member, [&](uraid::FaultPlan& plan) {
    uraid::FaultRule rule;
    rule.op = op == URAID_OP_READ    ? uraid::FaultOp::kRead
              : op == URAID_OP_WRITE ? uraid::FaultOp::kWrite
                                     : uraid::FaultOp::kAny;
    rule.offset = offset;
    rule.len = len;
    rule.times = times;
    plan.rules.push_back(rule);
  });
}

int uraid_member_read(uraid_member* member, void* buf, size_t len,
                      uint64_t offset, char* err, size_t err_len) {
  return Guarded(err, err_len, [&]() -> absl::Status {
    if (member == nullptr) return NullArgument("member");
    if (buf == nullptr && len > 0) return NullArgument("buf");
    return member->member->Read(buf, len, offset);
  });
}

int uraid_member_write(uraid_member* member, const void* buf, size_t len,
                       uint64_t offset, char* err, size_t err_len) {
  return Guarded(err, err_len, [&]() -> absl::Status {
    if (member == nullptr) return NullArgument("member");
    if (buf == nullptr && len > 0) return NullArgument("buf");
    return member->member->Write(buf, len, offset);
  });
}

uint64_t uraid_member_size(const uraid_member* member) {
  return member != nullptr ? member->member->Size() : 0;
}

const char* uraid_member_name(const uraid_member* member) {
  return member != nullptr ? member->member->Name().c_str() : nullptr;
}

void uraid_member_free(uraid_member* member) { delete member; }

int uraid_create_from(uraid_member* const* members, size_t n,
                      const uraid_create_options* options, uraid_array** out,
                      char* err, size_t err_len) {
  return FromHandles<uraid::CreateOptions>(/*allow_missing=*/true, members, n,
                                           options, out, err, err_len);
}

int uraid_assemble_from(uraid_member* const* members, size_t n,
                        const uraid_assemble_options* options,
                        uraid_array** out, char* err, size_t err_len) {
  return FromHandles<uraid::AssembleOptions>(/*allow_missing=*/false, members,
                                             n, options, out, err, err_len);
}

int uraid_get_member(const uraid_array* array, int index,
                     uraid_member_info* out) {
  if (array == nullptr || out == nullptr || index < 0) return -EINVAL;
  try {
    uraid::ArrayInfo info = array->array->Info();
    const uraid::SlotInfo* s = nullptr;
    size_t i = static_cast<size_t>(index);
    if (i < info.slots.size()) {
      s = &info.slots[i];
    } else if (i - info.slots.size() < info.spares.size()) {
      s = &info.spares[i - info.slots.size()];
    } else {
      return -ENOENT;
    }
    uraid_member_info c{};
    if (s->name.size() >= sizeof(c.name)) return -ERANGE;
    c.slot = s->state == uraid::SlotState::kSpare ? -1 : s->slot;
    c.state = uraid::capi::SlotStateCode(s->state);
    c.recovery_bytes = s->recovery_bytes;
    CopyMessage(s->name, c.name, sizeof(c.name));
    return uraid::capi::WriteInfo(c, out);
  } catch (...) {
    return -ENOMEM;
  }
}

int uraid_fail(uraid_array* array, const char* name, char* err,
               size_t err_len) {
  return OnNamedMember(array, name, &uraid::Array::FailMember, err, err_len);
}

int uraid_remove(uraid_array* array, const char* name, char* err,
                 size_t err_len) {
  return OnNamedMember(array, name, &uraid::Array::RemoveMember, err, err_len);
}

int uraid_add(uraid_array* array, uraid_member* member, char* err,
              size_t err_len) {
  return Guarded(err, err_len, [&]() -> absl::Status {
    if (array == nullptr) return NullArgument("array");
    if (member == nullptr) return NullArgument("member");
    return array->array->AddMember(uraid::ShareMember(member->member));
  });
}

int uraid_replace(uraid_array* array, const char* old_name,
                  uraid_member* replacement, char* err, size_t err_len) {
  return Guarded(err, err_len, [&]() -> absl::Status {
    if (array == nullptr) return NullArgument("array");
    if (old_name == nullptr) return NullArgument("old_name");
    if (replacement == nullptr) return NullArgument("replacement");
    return array->array->ReplaceMember(old_name,
                                       uraid::ShareMember(replacement->member));
  });
}

}  // extern "C"
