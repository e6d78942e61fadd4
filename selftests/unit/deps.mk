# Sources each host unit test links besides libnezha: the module's pure-C
# files are compiled here exactly as they are into nezha.ko.
UNIT_DEPS_test_wire  := kmod/wire.c
UNIT_DEPS_test_reasm := kmod/reasm.c
