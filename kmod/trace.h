/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Nezha tracepoints: every connection state change the health code sees,
 * and every scheduler decision worth following.  Enable with
 * echo 1 > /sys/kernel/tracing/events/nezha/enable.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM nezha

#if !defined(_NZ_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _NZ_TRACE_H

#include <linux/tracepoint.h>

TRACE_EVENT(nezha_conn_state,
	TP_PROTO(const char *rail, u64 job, u32 rank, u32 peer, u32 event,
		 int err, u32 resent),
	TP_ARGS(rail, job, rank, peer, event, err, resent),
	TP_STRUCT__entry(
		__string(rail, rail)
		__field(u64, job)
		__field(u32, rank)
		__field(u32, peer)
		__field(u32, event)
		__field(int, err)
		__field(u32, resent)
	),
	TP_fast_assign(
		__assign_str(rail, rail);
		__entry->job = job;
		__entry->rank = rank;
		__entry->peer = peer;
		__entry->event = event;
		__entry->err = err;
		__entry->resent = resent;
	),
	TP_printk("rail=%s job=%llx rank=%u peer=%u event=%s err=%d resent=%u",
		  __get_str(rail), __entry->job, __entry->rank, __entry->peer,
		  __print_symbolic(__entry->event, { 1, "down" }, { 2, "up" },
				   { 3, "peer-lost" }),
		  __entry->err, __entry->resent)
);

TRACE_EVENT(nezha_sched_state,
	TP_PROTO(const char *rail, u64 job, u32 rank, u32 peer, u8 from,
		 u8 to, u64 bw, u32 min_rtt_us, u32 start_us),
	TP_ARGS(rail, job, rank, peer, from, to, bw, min_rtt_us, start_us),
	TP_STRUCT__entry(
		__string(rail, rail)
		__field(u64, job)
		__field(u32, rank)
		__field(u32, peer)
		__field(u8, from)
		__field(u8, to)
		__field(u64, bw)
		__field(u32, min_rtt_us)
		__field(u32, start_us)
	),
	TP_fast_assign(
		__assign_str(rail, rail);
		__entry->job = job;
		__entry->rank = rank;
		__entry->peer = peer;
		__entry->from = from;
		__entry->to = to;
		__entry->bw = bw;
		__entry->min_rtt_us = min_rtt_us;
		__entry->start_us = start_us;
	),
	TP_printk("rail=%s job=%llx rank=%u peer=%u %s->%s bw=%llu min_rtt_us=%u start_us=%u",
		  __get_str(rail), __entry->job, __entry->rank, __entry->peer,
		  __print_symbolic(__entry->from, { 0, "probe" }, { 1, "hot" },
				   { 2, "cold" }),
		  __print_symbolic(__entry->to, { 0, "probe" }, { 1, "hot" },
				   { 2, "cold" }),
		  __entry->bw, __entry->min_rtt_us, __entry->start_us)
);

#endif /* _NZ_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE trace
#include <trace/define_trace.h>
