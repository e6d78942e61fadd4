# What each host unit test links besides libnezha: the module's pure-C
# files are compiled here exactly as they are into nezha.ko.
UNIT_DEPS_test_wire  := kmod/wire.c
UNIT_DEPS_test_reasm := kmod/reasm.c
# test_p2p hides completions from a reap to replay a late arrival.
UNIT_DEPS_test_p2p   := -Wl,--wrap=nz_queue_peek_batch
# nezhactl's pure parts (parsing, JSON, stats formats).
UNIT_DEPS_test_nezhactl := tools/parse.c tools/json.c tools/stats.c
# The aggregation node's core, driven without a socket, then on UDP.
UNIT_DEPS_test_agg_node := tools/aggd_core.c tools/aggd_slot.c
$(B)/unit/test_agg_node: tools/aggd_core.c tools/aggd_slot.c tools/aggd.h tools/aggd_int.h
UNIT_DEPS_test_agg_loss := selftests/unit/agg_node.c tools/aggd_core.c tools/aggd_slot.c tools/aggd_run.c -lpthread
$(B)/unit/test_agg_loss: selftests/unit/agg_node.c selftests/unit/agg_node.h tools/aggd_core.c tools/aggd_slot.c tools/aggd_run.c tools/aggd.h tools/aggd_int.h
# The cluster model, with the module's scheduler arithmetic (sched_est.c).
UNIT_DEPS_test_sim := tools/sim_net.c tools/sim_coll.c kmod/sched_est.c kmod/wire.c
$(B)/unit/test_sim: tools/sim_net.c tools/sim_coll.c tools/sim.h
UNIT_DEPS_test_sched_est := kmod/sched_est.c
UNIT_DEPS_test_health_learn := kmod/health_learn.c
# The collectives' tests: ranks as threads over an in-process transport.
UNIT_DEPS_test_coll := selftests/unit/tw_xport.c -lpthread
$(B)/unit/test_coll: selftests/unit/tw_xport.c selftests/unit/tw_xport.h
# An allreduce split between the node (in a thread) and the ring.
UNIT_DEPS_test_coll_agg := selftests/unit/tw_xport.c selftests/unit/agg_node.c tools/aggd_core.c tools/aggd_slot.c tools/aggd_run.c -lpthread
$(B)/unit/test_coll_agg: selftests/unit/tw_xport.c selftests/unit/tw_xport.h selftests/unit/agg_node.c selftests/unit/agg_node.h tools/aggd_core.c tools/aggd_slot.c tools/aggd_run.c tools/aggd.h tools/aggd_int.h
# The cut of a split allreduce, driven by models of the two paths.
UNIT_DEPS_test_agg_cut := -lm
