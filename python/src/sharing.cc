// Sharing and warm restart from Python (sharing.h).
#include "sharing.h"

#include <pybind11/operators.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "errors.h"
#include "fork.h"
#include "gil.h"
#include "pinpool/share.h"
#include "pool.h"
#include "sizes.h"
#include "with.h"

namespace pinpool::python {

namespace {

// A BlockHandle with the identity of its pool, so that a handle is never mapped in another pool.
struct HandleValue {
  std::string pool_id;  // 16 bytes
  BlockHandle handle;

  bool operator==(const HandleValue& o) const { return pool_id == o.pool_id && handle == o.handle; }
};

std::string IdBytes(const PoolId& id) {
  return std::string(reinterpret_cast<const char*>(id.data()), id.size());
}

std::string Hex(const std::string& bytes) {
  std::string out;
  for (unsigned char c : bytes) out += absl::StrFormat("%02x", c);
  return out;
}

// The descriptor of a socket.socket (fileno()) or an int.
int SocketFd(py::handle sock) {
  if (py::hasattr(sock, "fileno")) return sock.attr("fileno")().cast<int>();
  if (PyLong_Check(sock.ptr()) && !PyBool_Check(sock.ptr())) return sock.cast<int>();
  throw py::type_error(
      absl::StrFormat("a connected Unix stream socket (socket.socket or its "
                      "descriptor), not %s",
                      Py_TYPE(sock.ptr())->tp_name));
}

// `value` as a handle of the pool `id`.
const BlockHandle& HandleFor(py::handle value, const std::string& id, const char* what) {
  if (!py::isinstance<HandleValue>(value)) {
    throw py::type_error(
        absl::StrFormat("%s: a pinpool.BlockHandle, not %s", what, Py_TYPE(value.ptr())->tp_name));
  }
  const HandleValue& h = value.cast<const HandleValue&>();
  if (h.pool_id != id) {
    Throw(absl::StatusCode::kInvalidArgument,
          absl::StrFormat("%s: a handle of pool %s, not of this pool (%s)", what, Hex(h.pool_id),
                          Hex(id)));
  }
  return h.handle;
}

// Another process's view of a shared pool (pinpool/share.h). Its Blocks are views: the
// attachment keeps its chunks mapped while any lives, even after close().
class AttachmentObject final : public ViewParent {
 public:
  explicit AttachmentObject(std::unique_ptr<Attachment> a)
      : attachment_(std::move(a)), generation_(Generation()) {}
  ~AttachmentObject() {
    if (Stale(generation_)) (void)attachment_.release();
  }

  void ViewAdded() noexcept override { ++views_; }
  void ViewGone() noexcept override {
    if (--views_ == 0 && closed_) Unmap();
  }
  const PoolState* pool_state() const noexcept override { return nullptr; }

  Attachment& Open(const char* what) const {
    CheckNotForked(generation_, "attachment");
    if (closed_) ThrowFreed(absl::StrFormat("%s: the attachment is closed", what));
    return *attachment_;
  }
  void Close() {
    CheckNotForked(generation_, "attachment");
    closed_ = true;
    if (views_ == 0) Unmap();
  }
  bool closed() const { return closed_; }

 private:
  void Unmap() noexcept {
    if (Stale(generation_)) return;
    attachment_.reset();
  }

  std::unique_ptr<Attachment> attachment_;
  std::uint64_t generation_;
  std::size_t views_ = 0;
  bool closed_ = false;
};

}  // namespace

py::object HandleOfBlock(const BlockObject& b) {
  const PoolState* pool =
      b.pool != nullptr ? b.pool.get()
                        : (b.parent_state != nullptr ? b.parent_state->pool_state() : nullptr);
  if (pool == nullptr) {
    Throw(absl::StatusCode::kInvalidArgument,
          "an attachment's block has no handle of its own: it was mapped from one");
  }
  const BlockHandle h = Take(pool->pool->HandleOf(Block(b.data, b.size, b.chunk)));
  return py::cast(HandleValue{IdBytes(pool->pool->id()), h});
}

void AddPoolSharing(PoolClass& cls) {
  cls.def(
         "share",
         [](PoolObject& p, py::object sock) {
           const std::shared_ptr<PoolState> state = p.Open("share");
           const int fd = SocketFd(sock);
           Check(WithoutGil([&] { return state->pool->Share(fd); }));
         },
         py::arg("sock"),
         "share(sock)\n\nSends every chunk and the pool's description on `sock` (a connected "
         "Unix stream socket) for the process at the other end to map (pinpool.Attachment). "
         "Call again after the pool grew (Attachment.update). Needs a file-backed pool "
         "(backing='memfd' or a directory) without named classes (FailedPreconditionError). "
         "pinpool.ShareServer does this for every process that connects.")
      .def(
          "handle_of",
          [](PoolObject& p, py::handle block) {
            p.Open("handle_of");
            return HandleOfBlock(UsableBlock(block, "handle_of"));
          },
          py::arg("block"),
          "handle_of(block) -> BlockHandle\n\nThe handle naming `block` in every process "
          "attached to the pool (the same as block.handle).")
      .def(
          "quiesce",
          [](PoolObject& p) {
            const std::shared_ptr<PoolState> state = p.Open("quiesce");
            Check(WithoutGil([&] { return state->pool->Quiesce(); }));
            p.quiesced = true;
          },
          "quiesce()\n\nWarm restart, first step: ends every registration, and the pool "
          "allocates nothing more (blocks may still be freed). Close every RemoteAccess first "
          "(FailedPreconditionError otherwise). The GIL is released.")
      .def(
          "hand_over",
          [](PoolObject& p, py::object sock, py::iterable live) {
            const std::shared_ptr<PoolState> state = p.Open("hand_over");
            const std::string id = IdBytes(state->pool->id());
            std::vector<BlockHandle> handles;
            for (py::handle item : live) {
              if (PyObject_TypeCheck(item.ptr(), &BlockType)) {
                handles.push_back(
                    HandleFor(HandleOfBlock(UsableBlock(item, "hand_over")), id, "hand_over"));
              } else {
                handles.push_back(HandleFor(item, id, "hand_over"));
              }
            }
            const int fd = SocketFd(sock);
            Check(WithoutGil([&] { return state->pool->HandOver(fd, handles); }));
            state->handed_over = true;
          },
          py::arg("sock"), py::arg("live") = py::tuple(),
          "hand_over(sock, live=())\n\nWarm restart, second step (after quiesce()): sends the "
          "pool, with `live` (Blocks or BlockHandles the successor's application needs back), "
          "to the successor (Pool.adopt). The memory is the successor's afterwards: this "
          "process's Blocks of the pool raise FreedError and freeing them does nothing.")
      .def_static(
          "adopt",
          [](py::object sock, py::kwargs kwargs) {
            py::list domains;
            PoolOptions options = OptionsFrom(kwargs, domains);
            const int fd = SocketFd(sock);
            absl::StatusOr<std::unique_ptr<Pool>> pool =
                WithoutGil([&] { return Pool::Adopt(std::move(options), fd); });
            return NewPoolObject(Take(std::move(pool)), std::move(domains));
          },
          py::arg("sock"),
          "Pool.adopt(sock, **options) -> Pool\n\nThe successor's side of a warm restart: "
          "receives a handed-over pool on `sock` and makes a pool of `options` (as Pool(); the "
          "same backing and chunk_size) over the same chunks, their contents intact. Chunks "
          "register in the background; claim() gives the handed-over blocks back.")
      .def(
          "claim",
          [](PoolObject& p, py::handle handle) -> py::object {
            const std::shared_ptr<PoolState> state = p.Open("claim");
            const BlockHandle& h = HandleFor(handle, IdBytes(state->pool->id()), "claim");
            py::tuple key = py::make_tuple(h.chunk, h.offset);
            if (state->claimed.contains(key)) {
              py::object live = state->claimed[key]();
              if (!live.is_none() &&
                  reinterpret_cast<BlockObject*>(live.ptr())->state == BlockState::kLive) {
                return live;
              }
            }
            absl::StatusOr<Block> block = WithoutGil([&] { return state->pool->Claim(h); });
            const Block b = Take(std::move(block));
            py::object object = py::reinterpret_steal<py::object>(NewOwnedBlock(state, b));
            if (!object) throw py::error_already_set();
            state->claimed[key] = py::module_::import("weakref").attr("ref")(object);
            return object;
          },
          py::arg("handle"),
          "claim(handle) -> Block\n\nA block handed over to this pool: waits (GIL released) "
          "until its chunk is registered and returns it with this pool's keys; the same Block "
          "while it lives. NotFoundError for a handle that names no handed-over live block.")
      .def(
          "adopted_blocks",
          [](PoolObject& p) {
            const std::shared_ptr<PoolState> state = p.Open("adopted_blocks");
            const std::string id = IdBytes(state->pool->id());
            py::list out;
            for (const BlockHandle& h : state->pool->AdoptedBlocks()) {
              out.append(HandleValue{id, h});
            }
            return out;
          },
          "adopted_blocks() -> list[BlockHandle]\n\nThe handles Pool.adopt received, in the "
          "order sent.");
}

void AddSharing(py::module_& m) {
  py::class_<HandleValue>(
      m, "BlockHandle",
      "A block of a shared pool, named the same way in every process that "
      "maps its chunks and across a handover: the pool's id, the chunk's "
      "index and generation, the block's offset in it and its size. It pickles, so it can "
      "be sent to a multiprocessing worker, which maps it with its "
      "Attachment (Attachment.map) and writes the block in place.")
      .def(py::init([](py::bytes pool_id, std::uint32_t chunk, std::uint32_t generation,
                       std::uint64_t offset, std::uint64_t size) {
             std::string id = pool_id;
             if (id.size() != sizeof(PoolId)) {
               Throw(absl::StatusCode::kInvalidArgument,
                     absl::StrFormat("pool_id: %u bytes, not %u", id.size(), sizeof(PoolId)));
             }
             return HandleValue{std::move(id), BlockHandle{chunk, generation, offset, size}};
           }),
           py::arg("pool_id"), py::arg("chunk"), py::arg("generation"), py::arg("offset"),
           py::arg("size"))
      .def_property_readonly("pool_id", [](const HandleValue& h) { return py::bytes(h.pool_id); })
      .def_property_readonly("chunk", [](const HandleValue& h) { return h.handle.chunk; })
      .def_property_readonly("generation", [](const HandleValue& h) { return h.handle.generation; })
      .def_property_readonly("offset", [](const HandleValue& h) { return h.handle.offset; })
      .def_property_readonly("size", [](const HandleValue& h) { return h.handle.size; })
      .def(py::self == py::self)
      .def("__hash__",
           [](const HandleValue& h) {
             return py::hash(py::make_tuple(py::bytes(h.pool_id), h.handle.chunk,
                                            h.handle.generation, h.handle.offset, h.handle.size));
           })
      .def("__repr__",
           [](const HandleValue& h) {
             return absl::StrFormat(
                 "BlockHandle(pool=%s, chunk=%u, generation=%u, offset=%u, size=%u)",
                 Hex(h.pool_id).substr(0, 8), h.handle.chunk, h.handle.generation, h.handle.offset,
                 h.handle.size);
           })
      .def(py::pickle(
          [](const HandleValue& h) {
            return py::make_tuple(py::bytes(h.pool_id), h.handle.chunk, h.handle.generation,
                                  h.handle.offset, h.handle.size);
          },
          [](py::tuple t) {
            if (t.size() != 5) throw py::value_error("a BlockHandle pickles as 5 fields");
            return HandleValue{t[0].cast<std::string>(),
                               BlockHandle{t[1].cast<std::uint32_t>(), t[2].cast<std::uint32_t>(),
                                           t[3].cast<std::uint64_t>(), t[4].cast<std::uint64_t>()}};
          }));

  py::class_<AttachmentObject> attachment_class(
      m, "Attachment",
      "Attachment(sock)\n\nAnother process's view of a shared pool: receives what Pool.share "
      "sent on `sock` (a connected Unix stream socket) and maps every chunk (the GIL is "
      "released while it waits). map(handle) gives a block's memory as a Block view to read and "
      "write in place; an attached process cannot allocate, free or grant. "
      "Attachment.connect(path) connects to a pinpool.ShareServer, and then map() asks for the "
      "chunks the pool added since by itself. close() unmaps once no view lives.");
  attachment_class
      .def(py::init([](py::object sock) {
             const int fd = SocketFd(sock);
             absl::StatusOr<std::unique_ptr<Attachment>> a =
                 WithoutGil([&] { return Attachment::Receive(fd); });
             return std::make_unique<AttachmentObject>(Take(std::move(a)));
           }),
           py::arg("sock"))
      .def(
          "update",
          [](AttachmentObject& a, py::object sock) {
            Attachment& att = a.Open("update");
            const int fd = SocketFd(sock);
            const ViewHold hold(a);  // close() on another thread meanwhile waits for it
            Check(WithoutGil([&] { return att.Update(fd); }));
          },
          py::arg("sock"),
          "update(sock)\n\nReceives a later Pool.share of the same pool on `sock` and maps the "
          "chunks added since.")
      .def(
          "map",
          [](py::object self, py::handle handle) {
            AttachmentObject& a = self.cast<AttachmentObject&>();
            Attachment& att = a.Open("map");
            const BlockHandle& h = HandleFor(handle, IdBytes(att.pool_id()), "map");
            const std::span<std::byte> bytes = Take(att.Map(h));
            PyObject* view = NewView(self, &a, bytes.data(), bytes.size(), nullptr);
            if (view == nullptr) throw py::error_already_set();
            return py::reinterpret_steal<py::object>(view);
          },
          py::arg("handle"),
          "map(handle) -> Block\n\nThe block `handle` names, as a Block view of this process's "
          "mapping (no keys: an attached process registers nothing). NotFoundError when its "
          "chunk was added after the last update; InvalidArgumentError for a handle of another "
          "pool.")
      .def_property_readonly(
          "pool_id",
          [](const AttachmentObject& a) { return py::bytes(IdBytes(a.Open("pool_id").pool_id())); })
      .def_property_readonly(
          "chunk_size", [](const AttachmentObject& a) { return a.Open("chunk_size").chunk_size(); })
      .def_property_readonly(
          "chunks_mapped",
          [](const AttachmentObject& a) { return a.Open("chunks_mapped").chunks_mapped(); })
      .def_property_readonly("closed", &AttachmentObject::closed)
      .def("close", &AttachmentObject::Close,
           "close()\n\nUnmaps every chunk once no view of them lives (at once when none does).");
  WithStatement(
      attachment_class, [](AttachmentObject& a) { a.Open("with"); },
      [](AttachmentObject& a) { a.Close(); });
}

}  // namespace pinpool::python
