/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Per-CPU timers, for both BPF programs (bpf/main.bpf.c and
 * user/bpf/main.bpf.c).
 */
#ifndef __GMP_TIMER_BPF_H
#define __GMP_TIMER_BPF_H

/*
 * Set up the first @n per-CPU timers of @map, an array whose values begin
 * with their struct bpf_timer, to call @fn. Init only.
 */
static __always_inline int init_cpu_timers(void *map, void *fn, u32 n)
{
	int err;
	u32 i;

	bpf_for(i, 0, n) {
		struct bpf_timer *t = bpf_map_lookup_elem(map, &i);

		if (!t)
			return -ENOENT;
		err = bpf_timer_init(t, map, CLOCK_MONOTONIC);
		if (!err)
			err = bpf_timer_set_callback(t, fn);
		if (err) {
			scx_bpf_error("failed to set up a timer of CPU %u: %d", i, err);
			return err;
		}
	}
	return 0;
}

#endif /* __GMP_TIMER_BPF_H */
