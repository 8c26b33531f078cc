/* Stand-in for F-Stack v1.25's adapter/syscall/ff_socket_ops.c: only the lines of
 * ff_handle_each_context that kube-fstack's zone-lock patch (dataplane-image/patches) changes or
 * uses as context; and the context-reclaim patch's. */
static void ff_handle_each_context(void) {
    uint16_t i, nb_handled, tmp;
    static uint64_t loop_count = 0;
    static uint64_t cur_tsc, diff_tsc, drain_tsc = 0;

    if (unlikely(drain_tsc == 0 && ff_global_cfg.dpdk.pkt_tx_delay)) {
        drain_tsc = (rte_get_tsc_hz() + US_PER_S - 1) / US_PER_S * ff_global_cfg.dpdk.pkt_tx_delay;
/* ... */

    cur_tsc = rte_rdtsc();

    rte_spinlock_lock(&ff_so_zone->lock);

    assert(ff_so_zone->count >= ff_so_zone->free);
    tmp = nb_handled = ff_so_zone->count - ff_so_zone->free;

    while(1) {
        nb_handled = tmp;
        if (nb_handled) {
            for (i = 0; i < ff_so_zone->count; i++) {
/* ... */
            }
        }

        /*if (--ff_event_loop_nb <= 0 || ff_next_event_flag == 1) {
            break;
        }*/
/* ... */
        rte_pause();
    }

    rte_spinlock_unlock(&ff_so_zone->lock);

    loop_count++;

    DEBUG_LOG("loop_count:%lu, nb:%d, all_nb:%d\n",
/* ... */
}
