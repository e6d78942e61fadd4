// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * torch.distributed backend "nezha" for PyTorch 1.13: a thin
 * c10d::ProcessGroup over libnezha's C API.
 *
 * All the logic is in C: the rendezvous goes through torch's own store
 * (nz_comm_init_kv), and every operation is posted to libnezha's progress
 * engine (nz_engine_post), which runs it on its thread and calls back when
 * it is over.  This file only maps tensors to buffers, torch's dtypes and
 * ops to libnezha's, and a completion to a Work and its Future.
 *
 * Tensors must be CPU tensors.  A non-contiguous tensor is copied to a
 * contiguous one and, for outputs, copied back on completion.
 */
#include <torch/extension.h>
#include <pybind11/chrono.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

extern "C" {
#include <nezha.h>
}

namespace nezha_torch {

using c10d::OpType;
using Tensors = std::vector<at::Tensor>;

static std::string nz_msg(const char *what, int err, const char *msg)
{
	std::string s = std::string("nezha: ") + what + ": ";
	s += msg && *msg ? msg : std::strerror(-err);
	return s;
}

/* One operation: its tensors stay referenced until the engine is done. */
class WorkNezha : public c10d::Work {
public:
	WorkNezha(OpType type, const char *name, Tensors outputs,
		  std::chrono::milliseconds timeout)
		: Work(-1, type), name_(name), outputs_(std::move(outputs)),
		  timeout_(timeout),
		  future_(c10::make_intrusive<at::ivalue::Future>(
			  c10::ListType::create(c10::TensorType::get())))
	{
	}

	bool wait(std::chrono::milliseconds timeout) override
	{
		auto t = timeout == kNoTimeout ? timeout_ : timeout;
		{
			std::unique_lock<std::mutex> lock(mutex_);
			if (!cv_.wait_for(lock, t, [&] { return completed_; }))
				TORCH_CHECK(false, "nezha: ", name_, " did not complete within ",
					    t.count(), " ms");
			if (exception_)
				std::rethrow_exception(exception_);
		}
		return true;
	}

	c10::intrusive_ptr<c10::ivalue::Future> getFuture() override
	{
		return future_;
	}

	Tensors result() override
	{
		return outputs_;
	}

	/* From the engine's thread. */
	void complete(int err, const char *msg)
	{
		std::exception_ptr ex;

		if (!err && after)
			try {
				after();
			} catch (...) {
				ex = std::current_exception();
			}
		if (err)
			ex = std::make_exception_ptr(std::runtime_error(nz_msg(name_, err, msg)));
		keep.clear();
		after = nullptr;
		finish(ex);
		if (ex)
			future_->setError(ex);
		else
			future_->markCompleted(c10::IValue(outputs_));
	}

	std::vector<at::Tensor> keep;		/* what the buffers belong to */
	std::function<void()> after;		/* copy-out, checks */
	size_t expect_bytes = 0;		/* RECV */
	size_t got_bytes = 0;

private:
	const char *name_;
	Tensors outputs_;
	std::chrono::milliseconds timeout_;
	c10::intrusive_ptr<at::ivalue::Future> future_;
};

struct Pending {
	c10::intrusive_ptr<WorkNezha> work;
	/* arrays the engine copies at post; kept for the call only */
};

extern "C" void nz_torch_done(void *arg, int err, const char *msg, size_t bytes)
{
	auto *p = static_cast<Pending *>(arg);

	p->work->got_bytes = bytes;
	p->work->complete(err, msg);
	delete p;
}

/* ---- The store, as libnezha's key-value callbacks ---- */

struct StoreCtx {
	c10::intrusive_ptr<c10d::Store> store;
	std::string error;
};

extern "C" int nz_torch_kv_set(void *ctx, const char *key, const void *val, size_t len)
{
	auto *s = static_cast<StoreCtx *>(ctx);
	try {
		const uint8_t *p = static_cast<const uint8_t *>(val);
		s->store->set(key, std::vector<uint8_t>(p, p + len));
		return 0;
	} catch (const std::exception &e) {
		s->error = e.what();
		return -EIO;
	}
}

extern "C" int nz_torch_kv_wait(void *ctx, const char *key, int timeout_ms)
{
	auto *s = static_cast<StoreCtx *>(ctx);
	try {
		s->store->wait({ key }, std::chrono::milliseconds(timeout_ms));
		return 0;
	} catch (const std::exception &e) {
		s->error = e.what();
		/* c10d's stores report a timeout as an exception too */
		return std::strstr(e.what(), "imeout") ? -ETIMEDOUT : -EIO;
	}
}

extern "C" int nz_torch_kv_get(void *ctx, const char *key, void *buf, size_t cap, size_t *len)
{
	auto *s = static_cast<StoreCtx *>(ctx);
	try {
		auto v = s->store->get(key);
		*len = v.size();
		if (v.size() > cap)
			return -ENOSPC;
		std::memcpy(buf, v.data(), v.size());
		return 0;
	} catch (const std::exception &e) {
		s->error = e.what();
		return -EIO;
	}
}

/* ---- Type mapping ---- */

static enum nz_dtype nz_type(const at::Tensor &t)
{
	switch (t.scalar_type()) {
	case at::kFloat: return NZ_FLOAT32;
	case at::kDouble: return NZ_FLOAT64;
	case at::kHalf: return NZ_FLOAT16;
	case at::kBFloat16: return NZ_BFLOAT16;
	case at::kChar: return NZ_INT8;
	case at::kByte: return NZ_UINT8;
	case at::kBool: return NZ_UINT8;
	case at::kInt: return NZ_INT32;
	case at::kLong: return NZ_INT64;
	default:
		TORCH_CHECK(false, "nezha: dtype ", t.scalar_type(), " is not supported");
	}
}

static enum nz_redop nz_op(const c10d::ReduceOp &op, const at::Tensor &t)
{
	bool b = t.scalar_type() == at::kBool;

	switch (op.op_) {
	case c10d::ReduceOp::SUM: return b ? NZ_MAX : NZ_SUM;	/* bool: or */
	case c10d::ReduceOp::PRODUCT: return b ? NZ_MIN : NZ_PROD;	/* bool: and */
	case c10d::ReduceOp::MIN: return NZ_MIN;
	case c10d::ReduceOp::MAX: return NZ_MAX;
	case c10d::ReduceOp::AVG:
		TORCH_CHECK(!b, "nezha: AVG of bool tensors is not supported");
		return NZ_AVG;
	default:
		TORCH_CHECK(false, "nezha: reduction operator ", (int)op.op_,
			    " is not supported (sum, product, min, max, avg are)");
	}
}

static void check_cpu(const at::Tensor &t)
{
	TORCH_CHECK(t.device().is_cpu(), "nezha: only CPU tensors are supported, got one on ",
		    t.device());
	TORCH_CHECK(!t.is_sparse(), "nezha: sparse tensors are not supported");
}

class ProcessGroupNezha : public c10d::ProcessGroup {
public:
	ProcessGroupNezha(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
			  std::chrono::milliseconds timeout)
		: ProcessGroup(rank, size), timeout_(timeout)
	{
		StoreCtx ctx{ store, "" };
		struct nz_kv kv = {};
		struct nz_comm_opts o = {};
		struct nz_comm *comm = nullptr;
		std::vector<std::string> names;
		std::vector<const char *> rails;
		long long ms = timeout.count();
		int ret;

		kv.ctx = &ctx;
		kv.set = nz_torch_kv_set;
		kv.wait = nz_torch_kv_wait;
		kv.get = nz_torch_kv_get;
		kv.prefix = "pg";
		o.rank = rank;
		o.size = size;
		/* torch's timeout bounds the set-up and every transfer
		 * (the module's limit is one hour). */
		o.timeout_ms = (int)std::min<long long>(ms > 0 ? ms : 1800000, 3600000);
		o.op_timeout_ms = (unsigned int)o.timeout_ms;
		if (const char *env = std::getenv("NEZHA_RAILS")) {
			std::string s(env), cur;
			for (char ch : s + ",") {
				if (ch == ',' || ch == ' ') {
					if (!cur.empty())
						names.push_back(cur);
					cur.clear();
				} else {
					cur += ch;
				}
			}
			for (auto &n : names)
				rails.push_back(n.c_str());
			rails.push_back(nullptr);
			if (names.size())
				o.rails = rails.data();
		}
		ret = nz_comm_init_kv(&comm, &o, &kv);
		if (ret)
			TORCH_CHECK(false, nz_msg("init", ret, nz_last_error()),
				    ctx.error.empty() ? std::string() : " (store: " + ctx.error + ")");
		ret = nz_engine_start(&engine_, comm);
		if (ret) {
			nz_comm_destroy(comm);
			TORCH_CHECK(false, nz_msg("init", ret, nz_last_error()));
		}
	}

	~ProcessGroupNezha() override
	{
		nz_engine_destroy(engine_);
	}

	const std::string getBackendName() const override
	{
		return "nezha";
	}

	/* Abort every operation in flight (any thread). */
	void abort()
	{
		nz_engine_abort(engine_, -ECANCELED);
	}

	int nrails() const
	{
		return nz_comm_nrails(nz_engine_comm(engine_));
	}

	c10::intrusive_ptr<c10d::Work> broadcast(Tensors &tensors,
						 const c10d::BroadcastOptions &opts) override
	{
		auto t = single(tensors, "broadcast");
		auto w = make(OpType::BROADCAST, "broadcast", tensors);
		auto buf = output(w, t);
		struct nz_op op = {};

		op.kind = NZ_OP_BROADCAST;
		op.sendbuf = buf.data_ptr();
		op.recvbuf = buf.data_ptr();
		op.count = buf.numel();
		op.dtype = nz_type(buf);
		op.root = (int)opts.rootRank;
		return post(w, op, "broadcast");
	}

	c10::intrusive_ptr<c10d::Work> allreduce(Tensors &tensors,
						 const c10d::AllreduceOptions &opts) override
	{
		auto t = single(tensors, "allreduce");
		auto w = make(OpType::ALLREDUCE, "allreduce", tensors);
		auto buf = output(w, t);
		struct nz_op op = {};

		op.kind = NZ_OP_ALLREDUCE;
		op.sendbuf = buf.data_ptr();
		op.recvbuf = buf.data_ptr();
		op.count = buf.numel();
		op.dtype = nz_type(buf);
		op.op = nz_op(opts.reduceOp, buf);
		return post(w, op, "allreduce");
	}

	c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
		Tensors &tensors, const c10d::AllreduceCoalescedOptions &opts) override
	{
		TORCH_CHECK(!tensors.empty(), "nezha: allreduce_coalesced of no tensor");
		Tensors flat;
		for (auto &t : tensors) {
			check_cpu(t);
			TORCH_CHECK(t.scalar_type() == tensors[0].scalar_type(),
				    "nezha: allreduce_coalesced needs tensors of one dtype");
			flat.push_back(t.reshape({ -1 }));
		}
		auto buf = at::cat(flat);
		auto w = make(OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", tensors);
		Tensors outs = tensors;
		w->keep.push_back(buf);
		w->after = [outs, buf]() mutable {
			int64_t off = 0;
			for (auto &t : outs) {
				t.copy_(buf.narrow(0, off, t.numel()).view(t.sizes()));
				off += t.numel();
			}
		};
		struct nz_op op = {};
		op.kind = NZ_OP_ALLREDUCE;
		op.sendbuf = buf.data_ptr();
		op.recvbuf = buf.data_ptr();
		op.count = buf.numel();
		op.dtype = nz_type(buf);
		op.op = nz_op(opts.reduceOp, buf);
		return post(w, op, "allreduce_coalesced");
	}

	c10::intrusive_ptr<c10d::Work> reduce(Tensors &tensors,
					      const c10d::ReduceOptions &opts) override
	{
		auto t = single(tensors, "reduce");
		auto w = make(OpType::REDUCE, "reduce", tensors);
		bool root = opts.rootRank == getRank();
		auto buf = root ? output(w, t) : input(w, t);
		struct nz_op op = {};

		op.kind = NZ_OP_REDUCE;
		op.sendbuf = buf.data_ptr();
		op.recvbuf = root ? buf.data_ptr() : nullptr;
		op.count = buf.numel();
		op.dtype = nz_type(buf);
		op.op = nz_op(opts.reduceOp, buf);
		op.root = (int)opts.rootRank;
		return post(w, op, "reduce");
	}

	c10::intrusive_ptr<c10d::Work> allgather(std::vector<Tensors> &outputs, Tensors &inputs,
						 const c10d::AllgatherOptions &) override
	{
		auto in = single(inputs, "allgather");
		TORCH_CHECK(outputs.size() == 1 && (int)outputs[0].size() == getSize(),
			    "nezha: allgather needs one list of ", getSize(), " output tensors");
		auto w = make(OpType::ALLGATHER, "allgather", outputs[0]);
		auto sb = input(w, in);
		std::vector<void *> rbufs(getSize());
		std::vector<size_t> counts(getSize());
		for (int r = 0; r < getSize(); r++) {
			auto &o = outputs[0][r];
			check_cpu(o);
			TORCH_CHECK(o.numel() == in.numel() && o.scalar_type() == in.scalar_type(),
				    "nezha: allgather: output ", r, " differs from the input in size or dtype");
			rbufs[r] = output(w, o).data_ptr();
			counts[r] = o.numel();
		}
		struct nz_op op = {};
		op.kind = NZ_OP_ALLGATHERV;
		op.sendbuf = sb.data_ptr();
		op.recvbufs = rbufs.data();
		op.recvcounts = counts.data();
		op.dtype = nz_type(in);
		return post(w, op, "allgather");
	}

	c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &out, at::Tensor &in,
						       const c10d::AllgatherOptions &) override
	{
		check_cpu(in);
		check_cpu(out);
		TORCH_CHECK(out.numel() == in.numel() * getSize() &&
				    out.scalar_type() == in.scalar_type(),
			    "nezha: _allgather_base: the output must hold world_size inputs of its dtype");
		Tensors outs = { out };
		auto w = make(OpType::_ALLGATHER_BASE, "_allgather_base", outs);
		auto ob = output(w, out);
		auto ib = input(w, in);
		struct nz_op op = {};
		op.kind = NZ_OP_ALLGATHER;
		op.sendbuf = ib.data_ptr();
		op.recvbuf = ob.data_ptr();
		op.count = in.numel();
		op.dtype = nz_type(in);
		return post(w, op, "_allgather_base");
	}

	c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<Tensors> &outputs,
							   Tensors &inputs,
							   const c10d::AllgatherOptions &) override
	{
		(void)outputs;
		(void)inputs;
		TORCH_CHECK(false, "nezha: allgather_coalesced is not supported");
	}

	c10::intrusive_ptr<c10d::Work> gather(std::vector<Tensors> &outputs, Tensors &inputs,
					      const c10d::GatherOptions &opts) override
	{
		auto in = single(inputs, "gather");
		bool root = opts.rootRank == getRank();
		Tensors outs = root && !outputs.empty() ? outputs[0] : Tensors();
		auto w = make(OpType::GATHER, "gather", outs);
		auto sb = input(w, in);
		std::vector<void *> rbufs(getSize());
		if (root) {
			TORCH_CHECK(outputs.size() == 1 && (int)outputs[0].size() == getSize(),
				    "nezha: gather needs one list of ", getSize(), " outputs at the root");
			for (int r = 0; r < getSize(); r++) {
				auto &o = outputs[0][r];
				check_cpu(o);
				TORCH_CHECK(o.numel() == in.numel() && o.scalar_type() == in.scalar_type(),
					    "nezha: gather: output ", r, " differs from the input");
				rbufs[r] = output(w, o).data_ptr();
			}
		} else {
			TORCH_CHECK(outputs.empty() || outputs[0].empty(),
				    "nezha: gather: only the root has outputs");
		}
		struct nz_op op = {};
		op.kind = NZ_OP_GATHER;
		op.sendbuf = sb.data_ptr();
		op.recvbufs = rbufs.data();
		op.count = in.numel();
		op.dtype = nz_type(in);
		op.root = (int)opts.rootRank;
		return post(w, op, "gather");
	}

	c10::intrusive_ptr<c10d::Work> scatter(Tensors &outputs, std::vector<Tensors> &inputs,
					       const c10d::ScatterOptions &opts) override
	{
		auto out = single(outputs, "scatter");
		bool root = opts.rootRank == getRank();
		auto w = make(OpType::SCATTER, "scatter", outputs);
		auto rb = output(w, out);
		std::vector<const void *> sbufs(getSize());
		if (root) {
			TORCH_CHECK(inputs.size() == 1 && (int)inputs[0].size() == getSize(),
				    "nezha: scatter needs one list of ", getSize(), " inputs at the root");
			for (int r = 0; r < getSize(); r++) {
				auto &i = inputs[0][r];
				check_cpu(i);
				TORCH_CHECK(i.numel() == out.numel() && i.scalar_type() == out.scalar_type(),
					    "nezha: scatter: input ", r, " differs from the output");
				sbufs[r] = input(w, i).data_ptr();
			}
		} else {
			TORCH_CHECK(inputs.empty() || inputs[0].empty(),
				    "nezha: scatter: only the root has inputs");
		}
		struct nz_op op = {};
		op.kind = NZ_OP_SCATTER;
		op.recvbuf = rb.data_ptr();
		op.sendbufs = sbufs.data();
		op.count = out.numel();
		op.dtype = nz_type(out);
		op.root = (int)opts.rootRank;
		return post(w, op, "scatter");
	}

	c10::intrusive_ptr<c10d::Work> reduce_scatter(Tensors &outputs,
						      std::vector<Tensors> &inputs,
						      const c10d::ReduceScatterOptions &opts) override
	{
		auto out = single(outputs, "reduce_scatter");
		TORCH_CHECK(inputs.size() == 1 && (int)inputs[0].size() == getSize(),
			    "nezha: reduce_scatter needs one list of ", getSize(), " inputs");
		Tensors flat;
		for (auto &i : inputs[0]) {
			check_cpu(i);
			TORCH_CHECK(i.numel() == out.numel() && i.scalar_type() == out.scalar_type(),
				    "nezha: reduce_scatter: every input must be like the output");
			flat.push_back(i.reshape({ -1 }));
		}
		auto sb = at::cat(flat);
		auto w = make(OpType::REDUCE_SCATTER, "reduce_scatter", outputs);
		w->keep.push_back(sb);
		auto rb = output(w, out);
		struct nz_op op = {};
		op.kind = NZ_OP_REDUCE_SCATTER;
		op.sendbuf = sb.data_ptr();
		op.recvbuf = rb.data_ptr();
		op.count = out.numel();
		op.dtype = nz_type(out);
		op.op = nz_op(opts.reduceOp, out);
		return post(w, op, "reduce_scatter");
	}

	c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
		at::Tensor &out, at::Tensor &in, const c10d::ReduceScatterOptions &opts) override
	{
		check_cpu(in);
		check_cpu(out);
		TORCH_CHECK(in.numel() == out.numel() * getSize() &&
				    out.scalar_type() == in.scalar_type(),
			    "nezha: _reduce_scatter_base: the input must hold world_size outputs of its dtype");
		Tensors outs = { out };
		auto w = make(OpType::_REDUCE_SCATTER_BASE, "_reduce_scatter_base", outs);
		auto ib = input(w, in);
		auto ob = output(w, out);
		struct nz_op op = {};
		op.kind = NZ_OP_REDUCE_SCATTER;
		op.sendbuf = ib.data_ptr();
		op.recvbuf = ob.data_ptr();
		op.count = out.numel();
		op.dtype = nz_type(out);
		op.op = nz_op(opts.reduceOp, out);
		return post(w, op, "_reduce_scatter_base");
	}

	c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &out, at::Tensor &in,
						     std::vector<int64_t> &outSplits,
						     std::vector<int64_t> &inSplits,
						     const c10d::AllToAllOptions &) override
	{
		int n = getSize();
		check_cpu(in);
		check_cpu(out);
		TORCH_CHECK(in.scalar_type() == out.scalar_type(), "nezha: alltoall_base: dtypes differ");
		Tensors outs = { out };
		auto w = make(OpType::ALLTOALL_BASE, "alltoall_base", outs);
		auto ib = input(w, in);
		auto ob = output(w, out);
		struct nz_op op = {};
		op.dtype = nz_type(in);
		if (outSplits.empty() && inSplits.empty()) {
			TORCH_CHECK(in.numel() == out.numel() && in.numel() % n == 0,
				    "nezha: alltoall_base: sizes must be equal and divisible by world_size");
			op.kind = NZ_OP_ALLTOALL;
			op.sendbuf = ib.data_ptr();
			op.recvbuf = ob.data_ptr();
			op.count = in.numel() / n;
			return post(w, op, "alltoall_base");
		}
		std::vector<const void *> sb(n);
		std::vector<void *> rb(n);
		std::vector<size_t> sc(n), rc(n);
		splits(ib, inSplits, n, sc, [&](int r, char *p) { sb[r] = p; });
		splits(ob, outSplits, n, rc, [&](int r, char *p) { rb[r] = p; });
		op.kind = NZ_OP_ALLTOALLV;
		op.sendbufs = sb.data();
		op.recvbufs = rb.data();
		op.sendcounts = sc.data();
		op.recvcounts = rc.data();
		return post(w, op, "alltoall_base");
	}

	c10::intrusive_ptr<c10d::Work> alltoall(Tensors &outputs, Tensors &inputs,
						const c10d::AllToAllOptions &) override
	{
		int n = getSize();
		TORCH_CHECK((int)outputs.size() == n && (int)inputs.size() == n,
			    "nezha: alltoall needs ", n, " inputs and outputs");
		auto w = make(OpType::ALLTOALL, "alltoall", outputs);
		std::vector<const void *> sb(n);
		std::vector<void *> rb(n);
		std::vector<size_t> sc(n), rc(n);
		for (int r = 0; r < n; r++) {
			check_cpu(inputs[r]);
			check_cpu(outputs[r]);
			TORCH_CHECK(inputs[r].scalar_type() == inputs[0].scalar_type() &&
					    outputs[r].scalar_type() == inputs[0].scalar_type(),
				    "nezha: alltoall needs tensors of one dtype");
			sb[r] = input(w, inputs[r]).data_ptr();
			rb[r] = output(w, outputs[r]).data_ptr();
			sc[r] = inputs[r].numel();
			rc[r] = outputs[r].numel();
		}
		struct nz_op op = {};
		op.kind = NZ_OP_ALLTOALLV;
		op.dtype = nz_type(inputs[0]);
		op.sendbufs = sb.data();
		op.recvbufs = rb.data();
		op.sendcounts = sc.data();
		op.recvcounts = rc.data();
		return post(w, op, "alltoall");
	}

	c10::intrusive_ptr<c10d::Work> send(Tensors &tensors, int dst, int tag) override
	{
		auto t = single(tensors, "send");
		auto w = make(OpType::SEND, "send", Tensors());
		auto b = input(w, t);
		struct nz_op op = {};
		op.kind = NZ_OP_SEND;
		op.sendbuf = b.data_ptr();
		op.count = b.nbytes();
		op.dtype = NZ_UINT8;
		op.root = dst;
		op.tag = (uint64_t)(uint32_t)tag;
		return post(w, op, "send");
	}

	c10::intrusive_ptr<c10d::Work> recv(Tensors &tensors, int src, int tag) override
	{
		auto t = single(tensors, "recv");
		auto w = make(OpType::RECV, "recv", tensors);
		auto b = output(w, t);
		struct nz_op op = {};
		op.kind = NZ_OP_RECV;
		op.recvbuf = b.data_ptr();
		op.count = b.nbytes();
		op.dtype = NZ_UINT8;
		op.root = src;
		op.tag = (uint64_t)(uint32_t)tag;
		w->expect_bytes = b.nbytes();
		auto prev = w->after;
		WorkNezha *raw = w.get();
		w->after = [prev, raw, src]() {
			TORCH_CHECK(raw->got_bytes == raw->expect_bytes, "nezha: recv from rank ", src,
				    ": the message has ", raw->got_bytes, " bytes, the tensor ",
				    raw->expect_bytes);
			if (prev)
				prev();
		};
		return post(w, op, "recv");
	}

	c10::intrusive_ptr<c10d::Work> recvAnysource(Tensors &, int) override
	{
		TORCH_CHECK(false, "nezha: recv from any source is not supported");
	}

	c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &) override
	{
		auto w = make(OpType::BARRIER, "barrier", Tensors());
		struct nz_op op = {};
		op.kind = NZ_OP_BARRIER;
		return post(w, op, "barrier");
	}

private:
	static at::Tensor single(Tensors &ts, const char *what)
	{
		TORCH_CHECK(ts.size() == 1, "nezha: ", what, " takes one tensor per process (CPU)");
		check_cpu(ts[0]);
		return ts[0];
	}

	c10::intrusive_ptr<WorkNezha> make(OpType type, const char *name, const Tensors &outs)
	{
		return c10::make_intrusive<WorkNezha>(type, name, outs, timeout_);
	}

	/* A contiguous buffer of t that the operation reads. */
	static at::Tensor input(const c10::intrusive_ptr<WorkNezha> &w, const at::Tensor &t)
	{
		auto c = t.contiguous();
		w->keep.push_back(c);
		return c;
	}

	/* A contiguous buffer of t that the operation writes (and reads). */
	static at::Tensor output(const c10::intrusive_ptr<WorkNezha> &w, const at::Tensor &t)
	{
		if (t.is_contiguous()) {
			w->keep.push_back(t);
			return t;
		}
		auto c = t.contiguous();
		auto prev = w->after;
		at::Tensor dst = t;
		w->keep.push_back(c);
		w->after = [prev, dst, c]() mutable {
			dst.copy_(c);
			if (prev)
				prev();
		};
		return c;
	}

	/* Cut a buffer along dim 0 by split sizes (empty: equal parts). */
	template <typename F>
	static void splits(const at::Tensor &t, const std::vector<int64_t> &s, int n,
			   std::vector<size_t> &counts, F set)
	{
		int64_t rows = t.dim() ? t.size(0) : 1;
		int64_t row = rows ? t.numel() / rows : 0, off = 0;
		char *base = static_cast<char *>(t.data_ptr());
		size_t es = t.element_size();

		TORCH_CHECK(s.empty() || (int)s.size() == n, "nezha: alltoall_base: ", n,
			    " split sizes needed");
		if (s.empty())
			TORCH_CHECK(rows % n == 0, "nezha: alltoall_base: dim 0 not divisible by world_size");
		for (int r = 0; r < n; r++) {
			int64_t k = s.empty() ? rows / n : s[r];
			counts[r] = (size_t)(k * row);
			set(r, base + (size_t)(off * row) * es);
			off += k;
		}
		TORCH_CHECK(off == rows, "nezha: alltoall_base: split sizes sum to ", off,
			    ", not to dim 0 (", rows, ")");
	}

	c10::intrusive_ptr<c10d::Work> post(const c10::intrusive_ptr<WorkNezha> &w,
					    const struct nz_op &op, const char *what)
	{
		auto *p = new Pending{ w };
		int ret = nz_engine_post(engine_, &op, nz_torch_done, p);

		if (ret) {
			delete p;
			TORCH_CHECK(false, nz_msg(what, ret, nz_last_error()));
		}
		return w;
	}

	std::chrono::milliseconds timeout_;
	struct nz_engine *engine_ = nullptr;
};

static c10::intrusive_ptr<c10d::ProcessGroup>
create(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
       const std::chrono::duration<float> &timeout)
{
	auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
	return c10::make_intrusive<ProcessGroupNezha>(store, rank, size, ms);
}

} // namespace nezha_torch

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)
{
	using namespace nezha_torch;

	m.doc() = "torch.distributed backend over libnezha";
	m.def("create_process_group", &create, py::arg("store"), py::arg("rank"),
	      py::arg("size"), py::arg("timeout"), py::call_guard<py::gil_scoped_release>());
	py::class_<ProcessGroupNezha, c10d::ProcessGroup, c10::intrusive_ptr<ProcessGroupNezha>>(
		m, "ProcessGroupNezha")
		.def("abort", &ProcessGroupNezha::abort, py::call_guard<py::gil_scoped_release>())
		.def("nrails", &ProcessGroupNezha::nrails);
	m.def("library_version", []() { return std::string(nz_library_version()); });
}
