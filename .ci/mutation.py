"""Mutation testing per area with mutmut 3, mypy strict first (never in CI; see docs/testing.md).

    python .ci/mutation.py --list
    python .ci/mutation.py AREA [--jobs 2] [--fresh] [--only 'edge_agent.adapters.outbox.claims*' ...]
    python .ci/mutation.py --ledger      # regenerate docs/mutation-ledger.md from its data

Copies the tree (tracked and untracked-not-ignored files) to build/mutation/AREA, adds the area's
``only_mutate`` and test selection to the copy's ``[tool.mutmut]``, runs ``nice -n 10 mutmut run``
there and prints killed/survived per module; when the run ends (exit 0) it records the area's
figures in .ci/mutation-scores.json and regenerates docs/mutation-ledger.md (.ci/ledger.py;
--no-record skips that). Each area has its own copy, so its mutants/ cache survives between runs
(a second run only retests what changed) and two areas never share state.

Subprocesses: mutmut runs pytest with the cwd in build/mutation/AREA/mutants and exports the
mutant's name in MUTANT_UNDER_TEST, so ``python -m edge_agent`` started by a test (support.world)
imports the mutated copy and runs the mutant. But mutmut picks the tests per function from the hits
recorded in-process while it collects stats: a function reached *only* through a subprocess is
"no tests" and is not run at all. The table shows that column separately; it is not counted as
killed.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import ledger  # .ci/ledger.py, beside this file

REPO = Path(__file__).resolve().parents[1]

# area -> (modules to mutate, the narrowest tests that exercise them)
AREAS: dict[str, tuple[list[str], list[str]]] = {
    "core-motion": (
        ["edge_agent/core/camera/motion.py"],
        ["tests/core/camera/test_motion.py", "tests/core/camera/test_motion_rules.py"],
    ),
    "core-parsers": (
        [
            "edge_agent/core/sensor/parse.py",
            "edge_agent/core/messages/output_policy.py",
            "edge_agent/core/queue/backoff.py",
            "edge_agent/core/messages/status.py",
        ],
        [
            "tests/core/sensor/test_sensor_parse.py",
            "tests/core/messages/test_events.py",
            "tests/core/queue/test_backoff.py",
            "tests/app/cli/test_status_view.py",
            "tests/core/messages/test_status_snapshot.py",
            "tests/core/sensor/test_parse_rules.py",
            "tests/core/sensor/test_sensor_properties.py",
        ],
    ),
    "core-image": (
        ["edge_agent/core/vision/image_header.py", "edge_agent/core/camera/mjpeg_parts.py"],
        # pure tests only: test_mjpeg.py's servers and test_decode_bounds.py add minutes, no kills
        [
            "tests/core/vision/test_image_header.py",
            "tests/core/camera/test_mjpeg_parser.py",
            "tests/adapters/camera/test_bounded_properties.py",
            "tests/adapters/camera/test_bounded_input.py::test_header_dimensions_match_the_decoded_image",
            "tests/adapters/camera/test_mjpeg.py::test_boundary_from_content_type",
            "tests/adapters/camera/test_mjpeg.py::test_parser_splits_parts_fed_one_byte_at_a_time",
            "tests/adapters/camera/test_mjpeg.py::test_parser_accepts_a_boundary_quoted_with_its_dashes",
            "tests/adapters/camera/test_mjpeg.py::test_parser_marks_a_part_cut_short_by_the_next_boundary",
            "tests/adapters/camera/test_mjpeg.py::test_parser_refuses_endless_garbage",
            "tests/adapters/camera/test_mjpeg.py::test_jpeg_size_reads_the_sof_marker",
            "tests/adapters/camera/test_mjpeg.py::test_reduced_scale_only_when_the_letterbox_is_at_most_half",
        ],
    ),
    "core-queue": (
        ["edge_agent/core/queue/policy.py", "edge_agent/core/messages/builders.py"],
        [
            "tests/core/queue/test_queue_policy.py",
            "tests/core/queue/test_full_disk_policy.py",
            "tests/core/messages/test_messages.py",
            "tests/core/messages/test_message_schemas.py",
        ],
    ),
    "core-model": (
        [
            "edge_agent/core/vision/yolo.py",
            "edge_agent/core/vision/preprocess.py",
            "edge_agent/core/vision/classify.py",
            "edge_agent/core/runtime/onnx_wire.py",
            "edge_agent/core/runtime/providers.py",
            "edge_agent/core/runtime/tensorrt_plan.py",
        ],
        [
            "tests/core/vision/test_yolo.py",
            "tests/core/vision/test_yolo_rules.py",
            "tests/core/vision/test_preprocess.py",
            "tests/core/vision/test_preprocess_rules.py",
            "tests/core/vision/test_classifier_geometry.py",
            "tests/core/vision/test_classify.py",
            "tests/core/vision/test_classify_rules.py",
            "tests/core/runtime/test_onnx_wire.py",
            "tests/core/runtime/test_onnx_wire_rules.py",
            "tests/core/runtime/test_engine_cache_plan.py",
            "tests/core/runtime/test_provider_plan_rules.py",
            "tests/adapters/runtime/test_provider_fallback.py",
            "tests/adapters/runtime/test_board_providers.py",
            "tests/adapters/runtime/test_jetson_plan.py",
        ],
    ),
    # the sections' pydantic validators carry two decorators, which mutmut 3 does not mutate: their
    # rules live in mqtt_names.py / zones.py (mutated here and in core-zones) or are pinned by
    # tests/adapters/camera/test_bounded_properties.py and tests/core/config/test_config_rules.py without a score
    "core-config": (
        [
            "edge_agent/core/config/schema.py",
            "edge_agent/core/config/inputs.py",
            "edge_agent/core/config/outputs.py",
            "edge_agent/core/config/scene.py",
            "edge_agent/core/messages/mqtt_names.py",
        ],
        [
            "tests/core/config/test_config_rules.py",
            "tests/adapters/camera/test_bounded_properties.py",
            "tests/core/config/test_config_example.py",
            "tests/core/objects/test_tracking.py",  # config_scene.tracker_low_warning
        ],
    ),
    "core-package": (
        ["edge_agent/core/updates/package.py"],
        # not tests/app/updates/test_packages.py: its session fixture builds packages with `model pack`
        # subprocesses, ~20 s per mutant (a run would take hours); it tests the install end to end
        [
            "tests/core/updates/test_package_rules.py",
            "tests/core/updates/test_manifest_rules.py",
            "tests/adapters/updates/test_receiver.py",
        ],
    ),
    "core-state": (
        ["edge_agent/core/updates/store_state.py"],
        ["tests/adapters/updates/test_store_state.py"],
    ),
    "core-batch": (["edge_agent/core/messages/batch.py"], ["tests/core/messages/test_batch_and_parse.py"]),
    "core-objects": (
        ["edge_agent/core/objects/zones.py", "edge_agent/core/objects/lifecycle.py"],
        [
            "tests/core/objects/test_zone_geometry.py",
            "tests/core/objects/test_object_events.py",
            "tests/core/objects/test_tracking.py",
            "tests/app/agent/test_objects_step.py",
            "tests/core/objects/test_zone_exit.py",  # issue 36: exit hysteresis, [tracker] keys
            "tests/core/objects/test_scene_swap.py",  # set_scene (45 mutants "no tests" without it)
        ],
    ),
    "core-tracker": (
        [
            "edge_agent/core/objects/tracker.py",
            "edge_agent/core/objects/assignment.py",
            "edge_agent/core/objects/mot.py",
        ],
        [
            "tests/core/objects/test_tracker_rules.py",
            "tests/core/objects/test_mot_rules.py",
            "tests/core/objects/test_tracking.py",
            "tests/core/objects/test_tracker_split.py",
            "tests/core/objects/test_tracker_lost.py",  # issue 36: lost tracks in the low-score pass
        ],
    ),
    # the format registry (it was inference/formats.py; its area was inference-formats)
    "core-formats": (
        ["edge_agent/core/vision/formats.py"],
        [
            "tests/core/vision/test_format_rules.py",
            "tests/inference/test_formats.py",
            "tests/core/vision/test_format_registry.py",
            "tests/core/vision/test_yolo.py",
        ],
    ),
    "inference-guard": (
        ["edge_agent/inference/guard.py"],
        ["tests/inference/test_guard.py", "tests/inference/test_guard_rules.py"],
    ),
    # validate's comparison and report (shared with the update gate): in-process tests only; the CLI
    # runs in tests/tools/test_validate_any.py are subprocesses (no credit)
    "inference-compare": (
        ["edge_agent/inference/compare.py", "edge_agent/inference/report.py"],
        [
            "tests/inference/test_compare.py",
            "tests/inference/test_presets.py::test_validate_classifiers_with_classes_listed_in_another_order",
        ],
    ),
    # core modules that had no area (issue 19); measured or not: docs/mutation-ledger.md "Scores"
    "core-metrics": (
        ["edge_agent/core/vision/accuracy.py"],
        [
            "tests/core/vision/test_metrics.py",
            "tests/core/vision/test_metrics_rules.py",
            "tests/inference/test_compare.py",
        ],
    ),
    # issue 31/32: the confirmation format, the refusal-log throttle, the broker's identity files,
    # what a signed package is for
    "core-confirm": (["edge_agent/core/messages/confirm.py"], ["tests/core/messages/test_confirm.py"]),
    "core-log-throttle": (
        ["edge_agent/core/messages/log_throttle.py"],
        ["tests/core/messages/test_log_throttle.py"],
    ),
    "core-broker": (
        ["edge_agent/core/broker/identity.py", "edge_agent/core/broker/files.py"],
        ["tests/core/broker/test_broker_text.py", "tests/core/broker/test_broker_exact.py"],
    ),
    # core/updates/plan.py has its own area (core-plan, h-muta block): its runs failed with "DID NOT
    # RAISE" because test_package_rules.py popped a key from its shared parametrize dict, and mutmut
    # runs pytest twice in one process; the test now pops from a copy
    "core-binding": (
        ["edge_agent/core/updates/binding.py"],
        [
            "tests/core/updates/test_binding_rules.py",
            "tests/core/updates/test_manifest_rules.py",
            "tests/core/updates/test_binding_bite.py",  # issue 36: the survivors' edges
        ],
    ),
    "collector-trust": (
        [
            "edge_agent/adapters/collector/trust.py",
            "edge_agent/adapters/collector/statuses.py",
            "edge_agent/adapters/collector/confirmed.py",
            "edge_agent/app/collector/admission.py",
        ],
        [
            "tests/adapters/collector/test_collector_trust.py",
            "tests/adapters/collector/test_confirmed.py",
            "tests/app/collector/test_collector_guard.py",
            # issue 36: made for the 2026-12-03 run's survivors (replayed ids, other devices' rows)
            "tests/adapters/collector/test_trust_bite.py",
            "tests/adapters/collector/test_statuses_bite.py",
            "tests/app/collector/test_admission_bite.py",
        ],
    ),
    "core-fleet": (
        ["edge_agent/core/messages/fleet.py", "edge_agent/core/messages/body.py"],
        # not tests/adapters/collector/test_fleet_retire.py: `fleet` subprocesses (no credit) and a
        # PostgreSQL per mutant of parse() (2.4 s each: 20 min a run for nothing the pure tests miss)
        [
            "tests/core/messages/test_batch_and_parse.py",
            "tests/core/messages/test_fleet_rules.py",
            "tests/core/messages/test_fleet_numbers.py",  # body.py's fast-decoder test, 2026-12-07
            "tests/core/messages/test_body_bite.py",  # body.safe_text (h-mutx; not re-measured yet)
        ],
    ),
    "core-camera": (
        ["edge_agent/core/camera/source_spec.py", "edge_agent/core/camera/rtsp_options.py"],
        [
            "tests/core/camera/test_camera_source.py",
            "tests/core/camera/test_rtsp.py",
            "tests/adapters/camera/test_rtsp_transport.py",
        ],
    ),
    "core-schema": (
        ["edge_agent/core/vision/results.py", "edge_agent/core/vision/snapshot.py"],
        ["tests/core/vision/test_result_schema.py"],
    ),
    "core-ort": (["edge_agent/core/runtime/ort_compat.py"], ["tests/core/runtime/test_ort_compat.py"]),
    "core-config-example": (
        ["edge_agent/core/config/example.py", "edge_agent/core/config/collector.py"],
        [
            "tests/core/config/test_config_example.py",
            "tests/core/config/test_collector_config_example.py",
            "tests/core/config/test_collector_config.py",
        ],
    ),
    "inference-presets": (
        ["edge_agent/inference/preset_choice.py", "edge_agent/core/vision/classifier_presets.py"],
        ["tests/inference/test_preset_specs.py", "tests/inference/test_presets.py"],
    ),
    "inference-pipeline": (
        ["edge_agent/inference/pipeline.py", "edge_agent/inference/task.py"],
        [
            "tests/inference/test_pipeline.py",
            "tests/inference/test_formats.py",
            "tests/core/vision/test_format_registry.py",
            "tests/inference/test_full_scale.py",
            "tests/inference/test_presets.py",
        ],
    ),
    # the agent loop, split so each area finishes in < 30 min on 2 busy cores; the tests are the
    # in-process ones (Agent(cfg).run()): subprocess-only tests give "no tests" (module docstring)
    "agent-loop": (
        [
            "edge_agent/app/agent/agent.py",
            "edge_agent/app/agent/camera_pipeline.py",
            "edge_agent/app/agent/output_steps.py",
        ],
        [
            "tests/app/agent/test_agent_inproc.py",
            "tests/app/agent/test_camera_pipeline.py",
            "tests/app/agent/test_agent_inproc_sync.py",
            "tests/app/updates/test_agent_inproc_updates.py",
            "tests/app/agent/test_agent_inproc_pacing.py",
            "tests/app/agent/test_ready_and_stop.py",
            "tests/core/camera/test_motion.py::test_the_loop_infers_only_when_the_gate_opens",
            "tests/adapters/camera/test_decode_and_grant.py::test_a_large_jpeg_is_decoded_small_and_boxes_come_back_full_size",
        ],
    ),
    "agent-parts": (
        ["edge_agent/app/agent/parts.py", "edge_agent/app/agent/steps.py", "edge_agent/app/agent/health.py"],
        [
            "tests/app/agent/test_agent_parts.py",
            "tests/app/agent/test_agent_inproc.py::test_every_result_is_queued_with_every_field_and_counted",
            "tests/app/agent/test_agent_inproc.py::test_watchdog_pings_follow_their_interval_and_status_lines_carry_the_figures",
            "tests/app/agent/test_agent_inproc.py::test_prometheus_serves_the_live_figures",
            "tests/app/agent/test_agent_inproc.py::test_a_prometheus_port_in_use_is_an_error_and_inference_goes_on",
            "tests/app/agent/test_agent_inproc.py::test_an_mqtt_part_that_cannot_start_is_an_error_and_results_queue_locally",
        ],
    ),
    "agent-prefetch": (
        ["edge_agent/app/agent/prefetch.py"],
        [
            "tests/app/agent/test_prefetch.py",
            "tests/app/agent/test_agent_inproc.py::test_max_frames_stops_after_exactly_that_many",
        ],
    ),
    "agent-objects": (
        ["edge_agent/app/agent/objects_step.py"],
        ["tests/app/agent/test_objects_step.py"],
    ),
    # model updates (issue 19): package reading and signatures, receiver and store, the app side
    "model-package": (
        ["edge_agent/adapters/updates/signing.py", "edge_agent/adapters/updates/package_file.py"],
        # in-process, synthetic packages: the install tests (test_update_security, test_packages)
        # build their packages through `python -m edge_agent model pack`, which mutmut cannot credit
        ["tests/adapters/updates/test_package_file.py"],
    ),
    "model-receiver": (
        [
            "edge_agent/adapters/updates/receiver.py",
            "edge_agent/adapters/updates/transfers.py",
            "edge_agent/adapters/updates/store.py",
        ],
        [
            "tests/adapters/updates/test_receiver_rules.py",
            "tests/adapters/updates/test_receiver.py",
            "tests/adapters/updates/test_receiver_suback.py",
            "tests/adapters/updates/test_model_store.py",
            "tests/adapters/updates/test_store_state.py",
        ],
    ),
    # split in two (the pair took 30.7 min, 799 mutants): install/rollback on test_model_switch.py;
    # the gate on its own tests and the install tests that reach the gate's thresholds and crops
    "model-switch": (
        ["edge_agent/app/updates/switch.py"],
        ["tests/app/updates/test_model_switch.py"],
    ),
    "model-gate": (
        ["edge_agent/app/updates/gate.py"],
        [
            "tests/app/updates/test_model_gate.py",
            "tests/app/updates/test_model_switch.py::test_every_gate_threshold_is_honoured",
            "tests/app/updates/test_model_switch.py::test_force_switches_past_a_refusing_gate_and_is_recorded",
            "tests/app/updates/test_model_switch.py::test_a_cascade_package_gates_the_classifier_on_crops_and_its_files_replace_the_configs",
        ],
    ),
    # the app side in process (issue 19): `model install|status|rollback|push` through cli.main, the
    # agent's ModelUpdates without its loop, push_package against a real mosquitto; the end-to-end
    # tests (test_agent_updates.py) run `edge-agent run` subprocesses mutmut cannot credit. Split in
    # two: together (model-updates) they decided 696 of 1501 mutants in 59 min
    "model-updates": (
        [
            "edge_agent/app/updates/agent_side.py",
            "edge_agent/app/updates/push.py",
            "edge_agent/app/updates/model_cmd.py",
        ],
        [
            "tests/app/updates/test_model_cmd.py",
            "tests/app/updates/test_model_updates.py",
            "tests/app/updates/test_model_push.py",
            "tests/adapters/updates/test_receiver.py::test_the_receiver_thread_is_supervised",
        ],
    ),
    "model-cmd": (["edge_agent/app/updates/model_cmd.py"], ["tests/app/updates/test_model_cmd.py"]),
    "model-agent": (
        ["edge_agent/app/updates/agent_side.py", "edge_agent/app/updates/push.py"],
        [
            "tests/app/updates/test_model_updates.py",
            "tests/app/updates/test_model_push.py",
            "tests/adapters/updates/test_receiver.py::test_the_receiver_thread_is_supervised",
            "tests/app/updates/test_model_cmd.py::test_install_hands_the_package_to_the_running_agent_and_prints_its_verdict",
        ],
    ),
    # app/updates/agent_side.py alone (issue 19): model-agent's run decided 43 of its 588 mutants in 21 min,
    # every mutant of build_models/start/stop paying the push tests' broker too
    "model-updates-app": (
        ["edge_agent/app/updates/agent_side.py"],
        [
            "tests/app/updates/test_model_updates.py",
            "tests/adapters/updates/test_receiver.py::test_the_receiver_thread_is_supervised",
        ],
    ),
    # app/updates/push.py alone: the sending side and the verdict watcher against a real mosquitto
    "model-push": (
        ["edge_agent/app/updates/push.py"],
        [
            "tests/app/updates/test_model_push.py",
            "tests/app/updates/test_model_cmd.py::test_push_sends_the_package_and_reports_each_devices_verdict",
            "tests/app/updates/test_model_cmd.py::test_push_to_a_group_without_wait_sends_and_exits_0",
            "tests/app/updates/test_model_cmd.py::test_push_exit_code_is_0_only_when_every_expected_device_switched",
            "tests/app/updates/test_model_cmd.py::test_push_without_wait_does_not_wait_for_verdicts",
        ],
    ),
    # the outbox (issue 19), in three areas; in-process tests only, and only the fast ones: every
    # surviving mutant of put/flush/commit/resume (hit by every test) runs the whole selection, so
    # a 2-second test costs minutes per run. Left out: the kill -9 tests (a producer in a
    # subprocess: nothing to credit, and test_wal_deleted_after_kill_9 fails its clean run when
    # the machine is loaded: the WAL was checkpointed before the kill), the hypothesis stateful
    # test (minutes per mutant; OUTBOX_EXAMPLES=5 if wanted) and the MQTT sync (area mqtt-sync)
    "outbox-claims": (
        [
            "edge_agent/adapters/outbox/claims.py",
            "edge_agent/adapters/outbox/marks.py",
            "edge_agent/adapters/outbox/writer.py",
            "edge_agent/adapters/outbox/state.py",
        ],
        [
            "tests/adapters/outbox/test_ack_and_claim.py",
            "tests/adapters/outbox/test_id_filter.py",
            "tests/adapters/outbox/test_old_sqlite.py::test_ack_and_ack_and_claim_without_returning",
            "tests/adapters/outbox/test_pinned.py::test_a_claim_never_resends_an_acked_row_whose_delete_failed",
            "tests/adapters/outbox/test_pinned.py::test_the_meta_row_count_follows_acks_expiry_and_purge",
            "tests/adapters/outbox/test_pinned.py::test_drops_and_expiry_are_counted_in_their_own_transaction",
            "tests/adapters/outbox/test_pinned.py::test_sqlite_errors_leave_the_outbox_only_as_queue_errors",
            "tests/adapters/outbox/test_outbox_files.py::test_round_trip_put_flush_claim_ack",
            "tests/adapters/outbox/test_outbox_files.py::test_put_sets_the_id_only_when_absent",
            "tests/adapters/outbox/test_outbox_files.py::test_interval_zero_commits_inside_put",
            "tests/adapters/outbox/test_outbox_files.py::test_second_writer_is_refused",
            "tests/adapters/outbox/test_outbox_files.py::test_drop_oldest_at_count_cap",
            "tests/adapters/outbox/test_outbox_files.py::test_drop_oldest_at_byte_cap",
            "tests/adapters/outbox/test_outbox_files.py::test_reject_new_counts_and_raises",
            "tests/adapters/outbox/test_outbox_files.py::test_a_message_larger_than_the_byte_cap_is_always_rejected",
            "tests/adapters/outbox/test_outbox_files.py::test_old_rows_expire",
            "tests/adapters/outbox/test_loss_visible.py::test_a_clean_close_leaves_no_gap_and_counts_nothing",
            "tests/adapters/outbox/test_loss_visible.py::test_the_whole_file_lost_counts_its_rows_and_seq_and_boot_go_on",
            "tests/adapters/outbox/test_loss_visible.py::test_marks_survive_a_torn_slot_and_refuse_garbage",
            "tests/adapters/outbox/test_loss_visible.py::test_marks_are_written_before_the_commit",
            "tests/adapters/outbox/test_full_disk.py::test_a_queue_on_a_disk_full_to_the_brim_opens_drains_and_takes_new_results",
            "tests/adapters/outbox/test_full_disk.py::test_reject_new_on_a_full_disk_refuses_logs_once_and_closes_cleanly",
            "tests/adapters/outbox/test_full_disk.py::test_opening_and_closing_an_existing_queue_writes_nothing",
            # the tests made for this area's survivors (docs/mutation-ledger.md)
            "tests/adapters/outbox/test_outbox_claims.py",
            "tests/adapters/outbox/test_outbox_writer.py",
            "tests/adapters/outbox/test_outbox_marks.py",
            "tests/adapters/outbox/test_outbox.py",
        ],
    ),
    "outbox-disk": (
        [
            "edge_agent/adapters/outbox/outbox.py",
            "edge_agent/adapters/outbox/space.py",
            "edge_agent/adapters/outbox/reserve.py",
            "edge_agent/adapters/outbox/opening.py",
        ],
        [
            "tests/adapters/outbox/test_full_disk.py",
            "tests/adapters/outbox/test_pinned.py::test_a_quarter_of_the_reserve_is_kept_for_the_next_start",
            "tests/adapters/outbox/test_pinned.py::test_commits_are_sliced_so_the_wal_fits_the_released_reserve",
            "tests/adapters/outbox/test_pinned.py::test_sqlite_errors_leave_the_outbox_only_as_queue_errors",
            "tests/adapters/outbox/test_pinned.py::test_drops_and_expiry_are_counted_in_their_own_transaction",
            "tests/adapters/outbox/test_pinned.py::test_the_meta_row_count_follows_acks_expiry_and_purge",
            "tests/adapters/outbox/test_outbox_files.py::test_round_trip_put_flush_claim_ack",
            "tests/adapters/outbox/test_outbox_files.py::test_put_sets_the_id_only_when_absent",
            "tests/adapters/outbox/test_outbox_files.py::test_group_commit_by_batch_size_and_by_interval",
            "tests/adapters/outbox/test_outbox_files.py::test_interval_zero_commits_inside_put",
            "tests/adapters/outbox/test_outbox_files.py::test_second_writer_is_refused",
            "tests/adapters/outbox/test_outbox_files.py::test_drop_oldest_at_count_cap",
            "tests/adapters/outbox/test_outbox_files.py::test_reject_new_counts_and_raises",
            "tests/adapters/outbox/test_outbox_files.py::test_a_message_larger_than_the_byte_cap_is_always_rejected",
            "tests/adapters/outbox/test_outbox_files.py::test_full_disk_reject_new_refuses_then_recovers",
            "tests/adapters/outbox/test_outbox_files.py::test_space_goes_back_to_the_filesystem",
            "tests/adapters/outbox/test_outbox_files.py::test_old_rows_expire",
            "tests/adapters/outbox/test_ack_and_claim.py",
            "tests/adapters/outbox/test_loss_visible.py::test_a_clean_close_leaves_no_gap_and_counts_nothing",
            "tests/adapters/outbox/test_loss_visible.py::test_the_whole_file_lost_counts_its_rows_and_seq_and_boot_go_on",
            # the tests made for this area's survivors (docs/mutation-ledger.md)
            "tests/adapters/outbox/test_outbox_space.py",
            "tests/adapters/outbox/test_outbox_space_rules.py",
            "tests/adapters/outbox/test_outbox_reserve.py",
            "tests/adapters/outbox/test_outbox.py",
        ],
    ),
    # outbox.py and adapters/outbox/opening.py (the open, put, flush, flusher, stats, close), and the marks file
    # (adapters/outbox/marks.py), each on its own narrow in-process tests (issue 19): a crash is
    # support.outbox.crash (in process, so the restart's resume is credited), never kill -9
    "outbox-main": (
        ["edge_agent/adapters/outbox/outbox.py", "edge_agent/adapters/outbox/opening.py"],
        [
            "tests/adapters/outbox/test_outbox.py",
            "tests/adapters/outbox/test_outbox_marks.py",
            "tests/adapters/outbox/test_outbox_files.py::test_round_trip_put_flush_claim_ack",
            "tests/adapters/outbox/test_outbox_files.py::test_put_sets_the_id_only_when_absent",
            "tests/adapters/outbox/test_outbox_files.py::test_group_commit_by_batch_size_and_by_interval",
            "tests/adapters/outbox/test_outbox_files.py::test_interval_zero_commits_inside_put",
            "tests/adapters/outbox/test_outbox_files.py::test_second_writer_is_refused",
            "tests/adapters/outbox/test_outbox_files.py::test_drop_oldest_at_count_cap",
            "tests/adapters/outbox/test_outbox_files.py::test_reject_new_counts_and_raises",
            "tests/adapters/outbox/test_outbox_files.py::test_a_message_larger_than_the_byte_cap_is_always_rejected",
            "tests/adapters/outbox/test_outbox_files.py::test_full_disk_reject_new_refuses_then_recovers",
            "tests/adapters/outbox/test_outbox_files.py::test_corrupt_file_is_moved_aside_and_salvaged",
            "tests/adapters/outbox/test_outbox_files.py::test_a_file_that_is_not_a_database",
            "tests/adapters/outbox/test_outbox_files.py::test_old_rows_expire",
            "tests/adapters/outbox/test_loss_visible.py::test_the_whole_file_lost_counts_its_rows_and_seq_and_boot_go_on",
            "tests/adapters/outbox/test_loss_visible.py::test_a_clean_close_leaves_no_gap_and_counts_nothing",
            "tests/adapters/outbox/test_full_disk.py::test_a_queue_on_a_disk_full_to_the_brim_opens_drains_and_takes_new_results",
            "tests/adapters/outbox/test_full_disk.py::test_reject_new_on_a_full_disk_refuses_logs_once_and_closes_cleanly",
            "tests/adapters/outbox/test_full_disk.py::test_opening_and_closing_an_existing_queue_writes_nothing",
            "tests/adapters/outbox/test_pinned.py::test_sqlite_errors_leave_the_outbox_only_as_queue_errors",
            # the tests made for this area's survivors (docs/mutation-ledger.md)
            "tests/adapters/outbox/test_outbox_life.py",
            "tests/adapters/outbox/test_outbox_open.py",
        ],
    ),
    "outbox-marks": (
        ["edge_agent/adapters/outbox/marks.py"],
        [
            "tests/adapters/outbox/test_outbox_marks.py",
            "tests/adapters/outbox/test_outbox_writer.py::test_the_gap_a_crash_leaves_is_twice_the_last_batch_at_least_16_at_most_flush_batch",
            "tests/adapters/outbox/test_loss_visible.py::test_the_whole_file_lost_counts_its_rows_and_seq_and_boot_go_on",
            "tests/adapters/outbox/test_loss_visible.py::test_a_clean_close_leaves_no_gap_and_counts_nothing",
            "tests/adapters/outbox/test_loss_visible.py::test_marks_survive_a_torn_slot_and_refuse_garbage",
            "tests/adapters/outbox/test_loss_visible.py::test_marks_are_written_before_the_commit",
            "tests/adapters/outbox/test_loss_visible.py::test_first_100_bytes_overwritten_every_row_is_salvaged_or_counted_and_seq_goes_on",
            "tests/adapters/outbox/test_loss_visible.py::test_a_damaged_header_and_a_damaged_row_page_count_the_loss_from_the_kept_row_count",
            "tests/adapters/outbox/test_outbox_files.py::test_round_trip_put_flush_claim_ack",
            "tests/adapters/outbox/test_outbox_files.py::test_reject_new_counts_and_raises",
            "tests/adapters/outbox/test_outbox_files.py::test_full_disk_reject_new_refuses_then_recovers",
            "tests/adapters/outbox/test_full_disk.py::test_opening_and_closing_an_existing_queue_writes_nothing",
            "tests/adapters/outbox/test_full_disk.py::test_reject_new_on_a_full_disk_refuses_logs_once_and_closes_cleanly",
            # the tests made for this area's survivors (docs/mutation-ledger.md)
            "tests/adapters/outbox/test_outbox_life.py",
            "tests/adapters/outbox/test_outbox_space.py::test_a_result_given_up_on_a_full_file_is_counted_through_a_crash_right_after",
            "tests/adapters/outbox/test_marks_torn.py",  # issue 36: torn slot, refused writes, failed COMMITs
        ],
    ),
    # outbox-disk's two small modules on their narrowest tests (a few seconds in all): the whole
    # area took 51 min and reached 40 of adapters/outbox/reserve.py's 128 mutants
    "outbox-space": (
        ["edge_agent/adapters/outbox/space.py", "edge_agent/adapters/outbox/reserve.py"],
        [
            "tests/adapters/outbox/test_outbox_space.py",
            "tests/adapters/outbox/test_outbox_space_rules.py",
            "tests/adapters/outbox/test_outbox_reserve.py",
            "tests/adapters/outbox/test_full_disk.py",
            "tests/adapters/outbox/test_pinned.py::test_a_quarter_of_the_reserve_is_kept_for_the_next_start",
            "tests/adapters/outbox/test_pinned.py::test_commits_are_sliced_so_the_wal_fits_the_released_reserve",
            "tests/adapters/outbox/test_pinned.py::test_the_meta_row_count_follows_acks_expiry_and_purge",
            "tests/adapters/outbox/test_pinned.py::test_drops_and_expiry_are_counted_in_their_own_transaction",
            "tests/adapters/outbox/test_outbox_files.py::test_full_disk_reject_new_refuses_then_recovers",
            "tests/adapters/outbox/test_outbox_files.py::test_space_goes_back_to_the_filesystem",
            "tests/adapters/outbox/test_outbox_files.py::test_old_rows_expire",
        ],
    ),
    # the parts' shared figures and connections: every outbox test reaches them, these are the
    # narrowest that pin what they do (warn's rate limit, requeue's order, the checkpoint, the cap)
    "outbox-state": (
        ["edge_agent/adapters/outbox/state.py"],
        [
            "tests/adapters/outbox/test_outbox_state.py",
            "tests/adapters/outbox/test_outbox.py",
            "tests/adapters/outbox/test_full_disk.py::test_opening_and_closing_an_existing_queue_writes_nothing",
            "tests/adapters/outbox/test_outbox_space.py",
            "tests/adapters/outbox/test_pinned.py::test_sqlite_errors_leave_the_outbox_only_as_queue_errors",
        ],
    ),
    # the page reader: real files read as SQLite reads them, hostile bytes (hypothesis); not
    # tests/adapters/outbox/test_salvage.py (its CLI subprocesses cost seconds per mutant, no credit)
    "outbox-salvage": (
        ["edge_agent/adapters/outbox/pages.py"],
        [
            "tests/adapters/outbox/test_outbox_pages.py",
            "tests/adapters/outbox/test_outbox_pages_bounds.py",
            "tests/adapters/outbox/test_outbox_salvage.py",
            "tests/adapters/outbox/test_loss_visible.py::test_first_100_bytes_overwritten_every_row_is_salvaged_or_counted_and_seq_goes_on",
            "tests/adapters/outbox/test_loss_visible.py::test_a_damaged_header_and_a_damaged_row_page_count_the_loss_from_the_kept_row_count",
            "tests/adapters/outbox/test_loss_visible.py::test_a_damaged_header_does_not_bring_acknowledged_rows_back",
            "tests/adapters/outbox/test_loss_visible.py::test_without_the_pointer_map_freed_pages_would_come_back",
            "tests/adapters/outbox/test_pinned.py::test_salvage_skips_frames_of_a_transaction_that_never_committed",
            "tests/adapters/outbox/test_pinned.py::test_salvage_ignores_frames_of_an_older_wal_generation",
            "tests/adapters/outbox/test_pinned.py::test_salvage_with_the_header_intact_never_brings_back_acked_rows",
        ],
    ),
    # the salvage's file operations and the read-only views, in process (test_salvage.py's CLI
    # runs are subprocesses: no credit, seconds per mutant)
    "outbox-salvage-files": (
        ["edge_agent/adapters/outbox/db.py", "edge_agent/adapters/outbox/views.py"],
        [
            "tests/adapters/outbox/test_outbox_salvage.py",
            "tests/adapters/outbox/test_loss_visible.py::test_first_100_bytes_overwritten_every_row_is_salvaged_or_counted_and_seq_goes_on",
            "tests/adapters/outbox/test_loss_visible.py::test_a_damaged_header_and_a_damaged_row_page_count_the_loss_from_the_kept_row_count",
            "tests/adapters/outbox/test_outbox_files.py::test_corrupt_file_is_moved_aside_and_salvaged",
            "tests/adapters/outbox/test_outbox_files.py::test_a_file_that_is_not_a_database",
            "tests/adapters/outbox/test_old_sqlite.py",
        ],
    ),
    "collector": (
        ["edge_agent/app/collector/loop.py", "edge_agent/adapters/collector/db.py"],
        [
            "tests/app/collector/test_collector_round.py",
            "tests/adapters/collector/test_collector_db.py",
            "tests/adapters/collector/test_fleet_retire.py",
            "tests/adapters/collector/test_collector_mqtt.py",
        ],
    ),
    # the sync against a real mosquitto per test; not the three long scenarios of test_mqtt_sync.py
    # (a 10 000-row backlog, a broker restart mid-drain, a stalled broker under put(): 14 s of
    # the 28 s every surviving mutant paid, the area took ~2 h): they stay in the suite. Nor, since
    # the 2026-11-30 night run, three tests that wait by design (backoff_grows 3 s, rate_limit 2 s,
    # tls_wrong_ca 0.7 s; their checks are in test_sync_lifecycle/windows.py, which wait less): the
    # run's survivors were checked one by one against them (docs/mutation-ledger.md)
    "mqtt-sync": (
        ["edge_agent/adapters/mqtt/sync.py"],
        [
            "tests/adapters/mqtt/test_sync_accounting.py",
            "tests/adapters/mqtt/test_sync_lifecycle.py",
            "tests/adapters/mqtt/test_sync_windows.py",
            "tests/adapters/mqtt/test_sync_backoff.py",
            "tests/adapters/mqtt/test_sync_session.py::test_pubacks_received_as_the_session_ends_are_applied_not_resent",
            "tests/adapters/mqtt/test_sync_session.py::test_a_puback_handled_before_publish_returned_is_matched_when_the_mid_is_known",
            "tests/adapters/mqtt/test_sync_session.py::test_a_batch_mid_carries_all_its_rows_and_counts_as_one_batch_in_flight",
            "tests/adapters/mqtt/test_sync_session.py::test_a_restarted_sync_thread_releases_the_rows_it_had_in_flight",
            "tests/adapters/mqtt/test_sync_session.py::test_every_drop_is_followed_by_a_delay_and_only_a_stable_connection_resets_it",
            "tests/adapters/mqtt/test_sync_guarantees.py::test_rows_stay_on_disk_until_the_puback",
            "tests/adapters/mqtt/test_sync_guarantees.py::test_a_failing_sync_thread_is_restarted_counted_and_shown",
            "tests/adapters/mqtt/test_sync_guarantees.py::test_status_is_the_snapshot_given_and_the_will_says_offline",
            "tests/adapters/mqtt/test_batch_sync.py",
            "tests/adapters/mqtt/test_mqtt_sync.py::test_cap_reached_while_offline_sends_only_the_newest",
            "tests/adapters/mqtt/test_mqtt_sync.py::test_tls_with_client_certificate",
            "tests/adapters/mqtt/test_mqtt_sync.py::test_username_and_password_from_credentials_directory",
            "tests/adapters/mqtt/test_mqtt_sync.py::test_status_is_retained",
            "tests/adapters/mqtt/test_mqtt_sync.py::test_newest_first_with_a_small_window",
        ],
    ),
    # modules with no area until the 2026-11-30 late-night round (issue 19): the outside input and
    # trust paths first (the collector's MQTT side, TLS/credentials, image files, frame sources, the
    # model set, the config file); in-process tests only
    "collector-mqtt": (
        ["edge_agent/adapters/collector/subscriber.py"],
        [
            "tests/adapters/collector/test_collector_mqtt.py",
            "tests/app/collector/test_poison_message.py",
            "tests/app/collector/test_collector_round.py",
            # made for this area: manual acks, the session, leaving, flow control, login, TLS
            "tests/adapters/collector/test_collector_subscriber.py",
        ],
    ),
    "mqtt-connect": (
        ["edge_agent/adapters/mqtt/connect.py", "edge_agent/adapters/mqtt/probe.py"],
        ["tests/adapters/mqtt/test_credentials.py", "tests/adapters/mqtt/test_mqtt_connect.py"],
    ),
    "adapters-images": (
        ["edge_agent/adapters/camera/images.py", "edge_agent/adapters/camera/backends.py"],
        [
            "tests/adapters/camera/test_bounded_input.py::test_header_dimensions_match_the_decoded_image",
            "tests/adapters/camera/test_bounded_input.py::test_infer_refuses_a_20000x20000_png_in_one_line_under_300_mb",
            "tests/adapters/camera/test_bounded_input.py::test_folder_camera_skips_and_counts_a_huge_image_under_300_mb",
            "tests/adapters/camera/test_decode_bounds.py",
            "tests/adapters/camera/test_camera.py",
            "tests/adapters/camera/test_decode_and_grant.py",
            "tests/adapters/camera/test_images.py",
            "tests/adapters/camera/test_folder_source.py",
            # CvCaptureSource's V4L2 and GStreamer branches on stand-ins that behave as OpenCV's
            # backends, its network branch on the real FFmpeg (one real RTSP server, ~2.5 s)
            "tests/adapters/camera/test_capture_backends.py",
        ],
    ),
    # not tests/inference/test_guard.py (its run/doctor/infer checks are subprocesses); the
    # provider test is the one that shows float_model reaching the detector's load
    "app-modelset": (
        ["edge_agent/app/agent/modelset.py", "edge_agent/app/cli/configfile.py"],
        [
            "tests/app/agent/test_modelset.py",
            "tests/app/cli/test_configfile.py",
            "tests/adapters/runtime/test_provider_fallback.py::test_config_float_model_reaches_the_detector_load",
        ],
    ),
    # the rest of the late-night round's list (issue 19): areas made, run as the notes in
    # docs/mutation-ledger.md say; run_cmd.py and track_infer.py have no in-process test yet (their tests
    # run `edge-agent run|demo|infer --track` as subprocesses: every mutant would be "no tests")
    "adapters-host": (
        ["edge_agent/adapters/host/metrics_http.py", "edge_agent/adapters/host/probes.py"],
        [
            "tests/adapters/host/test_metrics_http.py",
            "tests/adapters/host/test_system_probes.py",
            "tests/adapters/host/test_host_probes.py",
        ],
    ),
    # the real gst-rtsp-server (UDP only, TCP) and scripted cameras on loopback for the probe's
    # logins, SDPs and bounds; the capture source's RTSP opens on the real FFmpeg
    "camera-rtsp": (
        ["edge_agent/adapters/camera/rtsp.py"],
        [
            "tests/adapters/camera/test_rtsp_transport.py",
            "tests/adapters/camera/test_rtsp_probe.py",
            "tests/adapters/camera/test_capture_backends.py::test_an_rtsp_url_opens_over_the_configured_transport",
            "tests/adapters/camera/test_capture_backends.py::test_an_rtsp_camera_that_accepts_and_never_answers_does_not_hang_the_open",
            "tests/adapters/camera/test_capture_backends.py::test_an_rtsp_camera_opens_and_the_log_names_it_without_its_password",
            "tests/adapters/camera/test_capture_backends.py::test_the_operators_ffmpeg_options_are_kept_and_the_transport_is_for_that_open_only",
        ],
    ),
    "app-infer": (
        ["edge_agent/app/workbench/infer_cmd.py"],
        [
            "tests/app/workbench/test_infer_inproc.py",
            "tests/app/workbench/test_infer_bite.py",
            "tests/app/workbench/test_infer_options.py",  # issue 36: the options reach the models
            "tests/app/workbench/test_infer_help.py",  # the usage's value names, the stated defaults
            # `register`'s help: every option has one, a default it states is the code's
            "tests/app/cli/test_cli_help.py",
            "tests/app/cli/test_cli_manners.py::test_every_option_of_every_command_has_help",
            "tests/app/cli/test_cli_manners.py::test_help_shows_defaults_and_no_markup",
        ],
    ),
    # issue 36: the fleet views in process (main([...]) with capsys), on SQLite and a real PostgreSQL
    "fleet-cmd": (
        ["edge_agent/app/collector/fleet_cmd.py"],
        [
            "tests/app/collector/test_fleet_cmd.py",
            "tests/app/collector/test_fleet_history_cmd.py",
            "tests/app/collector/test_fleet_unknown.py",
            # issue 36 (h-mutq): the tables line by line, --cameras --json, --limit's bounds, the help pages
            "tests/app/collector/test_fleet_cmd_bite.py",
        ],
    ),
    # issue 36: the capture thread's start/stop/restart and its reconnects, with real threads
    "camera-capture": (
        ["edge_agent/adapters/camera/capture.py"],
        ["tests/adapters/camera/test_camera.py", "tests/adapters/camera/test_camera_restart.py"],
    ),
    # what a model file says about itself (names, labels file, imgsz, inspect's JSON): pure parsing
    # and the loads of test_runtime.py's tiny models
    "model-info": (
        ["edge_agent/adapters/runtime/model_info.py"],
        ["tests/adapters/runtime/test_model_info.py", "tests/adapters/runtime/test_runtime.py"],
    ),
    # the receiver's transfers on disk alone (in model-receiver too, whose run predates it)
    "model-transfer-disk": (
        ["edge_agent/adapters/updates/transfers.py"],
        ["tests/adapters/updates/test_receiver_rules.py"],
    ),
    # model_cmd.py's `register` (the argparse tree, 250 mutants model-cmd never reached: each
    # survivor there pays all of test_model_cmd.py): the help and usage tests, and the fast
    # in-process commands that parse every option's type and reach every subcommand's function
    "model-cmd-help": (
        ["edge_agent/app/updates/model_cmd.py"],
        [
            "tests/app/cli/test_cli_help.py",
            "tests/app/cli/test_cli_manners.py::test_every_option_of_every_command_has_help",
            "tests/app/cli/test_cli_manners.py::test_help_shows_defaults_and_no_markup",
            "tests/app/updates/test_model_cmd.py::test_push_argument_mistakes_are_one_line_and_nothing_is_sent",
            "tests/app/updates/test_model_cmd.py::test_push_arguments_at_their_limits_pass_the_checks",
            "tests/app/updates/test_model_cmd.py::test_push_of_a_missing_package_is_one_line",
            "tests/app/updates/test_model_cmd.py::test_install_of_a_missing_file_is_one_line",
            "tests/app/updates/test_model_cmd.py::test_install_to_an_agent_that_never_answers_times_out_with_one_line",
            "tests/app/updates/test_model_cmd.py::test_install_force_switches_past_the_gate_and_json_prints_the_whole_outcome",
            "tests/app/updates/test_model_cmd.py::test_an_older_version_needs_allow_downgrade",
            "tests/app/updates/test_model_cmd.py::test_status_json_shows_the_live_update_state_of_a_running_agent",
            "tests/app/updates/test_model_cmd.py::test_rollback_with_nothing_to_go_back_to_exits_1_and_signals_nobody",
        ],
    ),
    # issue 19, night: the model tools and the onnxruntime adapter had no area
    "tools-convert": (
        ["edge_agent/tools/convert.py", "edge_agent/tools/convert_ops.py"],
        [
            "tests/tools/test_model_convert.py",
            "tests/tools/test_convert_ops.py",
            "tests/tools/test_convert_schemas.py",
            "tests/tools/test_convert_ops_rules.py",
        ],
    ),
    "tools-quantize": (
        ["edge_agent/tools/quantize.py", "edge_agent/tools/dequantize.py"],
        [
            "tests/tools/test_quantize.py",
            "tests/tools/test_quantize_errors.py",
            "tests/tools/test_quantize_inputs.py",
            "tests/tools/test_quantize_flags.py",
            "tests/tools/test_dequantize_rules.py",
            "tests/tools/test_quantize_calls.py",
            "tests/tools/test_dequantize_kinds.py",
            "tests/tools/test_classifier.py::test_quantize_and_validate_a_classifier",
            "tests/tools/test_model_convert.py::test_quantize_for_a_nano_stamps_only_what_1_11_reads",
        ],
    ),
    # tools/export_check.py has its own area (tools-export-check, h-mutv block): it needs torch
    "tools-graph": (
        ["edge_agent/tools/graph.py"],
        [
            "tests/tools/test_graph.py",
            "tests/tools/test_graph_rules.py",
            "tests/tools/test_export_check.py",
            "tests/tools/test_export_check_parts.py",
            "tests/tools/test_classifier.py",
        ],
    ),
    "tools-bench": (
        ["edge_agent/tools/bench.py"],
        ["tests/tools/test_bench.py", "tests/tools/test_bench_parts.py"],
    ),
    "runtime": (
        [
            "edge_agent/adapters/runtime/onnx_model.py",
            "edge_agent/adapters/runtime/tensorrt_host.py",
            "edge_agent/adapters/runtime/board.py",
            "edge_agent/adapters/runtime/planner.py",
        ],
        [
            "tests/adapters/runtime/test_runtime.py",
            "tests/adapters/runtime/test_provider_planner.py",
            "tests/adapters/runtime/test_provider_fallback.py",
            "tests/adapters/runtime/test_board_providers.py",
            "tests/adapters/runtime/test_jetson_plan.py",
            "tests/adapters/runtime/test_runtime_session.py",
            "tests/adapters/runtime/test_board_files.py",
        ],
    ),
    # dequantize.py alone (issue 19, 2026-12-01): tools-quantize takes over an hour for both modules, so
    # the two run as separate copies; these are the tests that reach dequantize.py in process
    "tools-dequantize": (
        ["edge_agent/tools/dequantize.py"],
        [
            "tests/tools/test_dequantize_rules.py",
            "tests/tools/test_dequantize_kinds.py",
            "tests/tools/test_quantize_inputs.py",
            "tests/tools/test_quantize_flags.py",
            "tests/tools/test_quantize_errors.py",
        ],
    ),
    # issue 19, 2026-12-01: the CLI commands whose tests were only `edge-agent ...` subprocesses
    # (every mutant "no tests"); now through cli.main in process
    # (+ the in-process help tests, for the argparse trees: every option has help, defaults shown)
    "app-track": (
        ["edge_agent/app/workbench/track_infer.py", "edge_agent/app/workbench/track_cmd.py"],
        [
            "tests/app/workbench/test_track_inproc.py",
            "tests/app/workbench/test_track_bite.py",  # issue 36: the ms/frame figure
            "tests/app/cli/test_cli_help.py",
            "tests/app/cli/test_cli_manners.py::test_every_option_of_every_command_has_help",
            "tests/app/cli/test_cli_manners.py::test_help_shows_defaults_and_no_markup",
        ],
    ),
    "app-run": (
        ["edge_agent/app/cli/run_cmd.py"],
        [
            "tests/app/cli/test_run_cmd.py",
            "tests/app/cli/test_cli_help.py",
            "tests/app/cli/test_cli_manners.py::test_every_option_of_every_command_has_help",
            "tests/app/cli/test_cli_manners.py::test_help_shows_defaults_and_no_markup",
        ],
    ),
    # issue 34: several cameras. The scheduler and the decode size are pure; the camera tables'
    # own checks (scene_problem, camera_views) are plain functions, so mutmut can reach them
    "core-cameras": (
        [
            "edge_agent/core/camera/scheduler.py",
            "edge_agent/core/camera/decode_size.py",
            "edge_agent/core/config/cameras.py",
        ],
        [
            "tests/core/camera/test_scheduler.py",
            "tests/core/camera/test_scheduler_drops.py",
            "tests/core/camera/test_decode_size.py",
            "tests/core/config/test_cameras_config.py",
        ],
    ),
    # not camera_pipeline.py: every agent test reaches it, ~30 s a mutant on 2 cores (a partial run
    # of 414 of 624 mutants took 35 min; its survivors got the tests in test_camera_pipeline.py)
    "app-cameras": (["edge_agent/app/agent/scheduling.py"], ["tests/app/agent/test_scheduling.py"]),
    # --- h-muta ---
    # issue 36: modules without a score, each on its pure tests
    "core-rollout": (
        ["edge_agent/core/updates/rollout.py"],
        ["tests/core/updates/test_rollout_rules.py", "tests/core/updates/test_rollout_bite.py"],
    ),
    "core-health-history": (
        ["edge_agent/core/messages/health_history.py"],
        [
            "tests/core/messages/test_health_history.py",
            "tests/core/messages/test_fleet_metrics.py",
            "tests/core/messages/test_health_history_bite.py",
        ],
    ),
    "core-fleet-metrics": (
        ["edge_agent/core/messages/fleet_metrics.py"],
        ["tests/core/messages/test_fleet_metrics.py", "tests/core/messages/test_fleet_metrics_bite.py"],
    ),
    "core-retention": (
        ["edge_agent/core/messages/retention.py"],
        ["tests/core/messages/test_retention_spans.py"],
    ),
    "core-count-keys": (
        ["edge_agent/core/objects/count_keys.py"],
        ["tests/core/objects/test_count_keys.py", "tests/core/objects/test_count_keys_bite.py"],
    ),
    "core-agent-metrics": (
        ["edge_agent/core/messages/agent_metrics.py"],
        ["tests/core/messages/test_agent_metrics.py", "tests/core/messages/test_agent_metrics_bite.py"],
    ),
    "core-camera-messages": (
        ["edge_agent/core/messages/cameras.py"],
        ["tests/core/messages/test_camera_topics.py", "tests/core/messages/test_camera_rows_bite.py"],
    ),
    # the receiver on files in tmp_path, no broker
    "core-cancel": (
        ["edge_agent/core/updates/cancel.py"],
        [
            "tests/adapters/updates/test_receiver_cancel.py",
            "tests/core/updates/test_binding_bite.py",
            "tests/core/updates/test_cancel_rules.py",
        ],
    ),
    # the validators of plan.py, sensor_models.py and web.py call plain functions (plan_problem,
    # table_problem, bind_problem, token_problem): mutmut 3 does not mutate decorated methods
    "core-plan": (
        ["edge_agent/core/updates/plan.py"],
        ["tests/core/updates/test_package_rules.py", "tests/core/updates/test_plan_bite.py"],
    ),
    "core-sensor-models": (
        ["edge_agent/core/config/sensor_models.py"],
        ["tests/core/config/test_sensor_models_config.py"],
    ),
    "core-web": (["edge_agent/core/config/web.py"], ["tests/core/config/test_web_config.py"]),
    # --- h-mutc ---
    # issue 36: the host files (fsync'd writes, the systemd notify socket, the status file), pure
    # tests on tmp_path and a real unix datagram socket; not tests/test_durable_writes.py: its scan of
    # the sources for stray .replace calls fails on mutmut's copy (the trampolines), so no stats run
    "host-files": (
        [
            "edge_agent/adapters/host/durable.py",
            "edge_agent/adapters/host/sdnotify.py",
            "edge_agent/adapters/host/statusfile.py",
        ],
        [
            "tests/adapters/host/test_durable.py",
            "tests/adapters/host/test_sdnotify.py",
            "tests/adapters/host/test_statusfile.py",
        ],
    ),
    # issue 36: the outbox's count tallies and the old count checkpoint, on real SQLite files
    "outbox-counts": (
        ["edge_agent/adapters/outbox/count_store.py", "edge_agent/adapters/outbox/tallies.py"],
        [
            "tests/adapters/outbox/test_count_store.py",
            "tests/adapters/outbox/test_outbox_tallies.py",
            "tests/core/objects/test_count_keys.py",
        ],
    ),
    # issue 36: the outbox's flusher thread, apart: its mutants wait on a real thread (a run of it
    # with outbox-counts decided 37 mutants in 5 min); test_flusher_rules.py drives it
    # directly on a QueueState
    "outbox-flusher": (
        ["edge_agent/adapters/outbox/flusher.py"],
        ["tests/adapters/outbox/test_flusher_rules.py", "tests/adapters/outbox/test_flusher.py"],
    ),
    # issue 36: the receiver's ring of received frames and its cancel commitments
    "updates-ring": (
        ["edge_agent/adapters/updates/frame_ring.py", "edge_agent/adapters/updates/cancels.py"],
        [
            "tests/adapters/updates/test_frame_ring.py",
            "tests/adapters/updates/test_cancels.py",
            "tests/adapters/updates/test_receiver_cancel.py",
            "tests/app/updates/test_cancel_restart.py",  # the marks read at a restart (3.5 s)
        ],
    ),
    # --- h-mutb ---
    # issue 36, 2026-12-03: modules without a score. The format base and RT-DETR on their pure tests
    # (not test_formats.py's real-yolov8n comparison: 18 s a run, the same decode paths)
    "core-format-parts": (
        ["edge_agent/core/vision/format_base.py", "edge_agent/core/vision/format_detr.py"],
        [
            "tests/core/vision/test_format_detr.py",
            "tests/core/vision/test_format_detr_rules.py",  # made for this area's survivors
            "tests/core/vision/test_format_rules.py",
            "tests/core/vision/test_format_registry.py",
            "tests/inference/test_formats.py::test_each_format_finds_the_square_at_its_true_place",
            "tests/inference/test_formats.py::test_formats_agree_on_a_busy_scene",
            "tests/inference/test_formats.py::test_a_score_must_exceed_the_threshold",
            "tests/inference/test_formats.py::test_format_table_from_shape_and_metadata",
            "tests/inference/test_formats.py::test_anything_else_is_one_line_naming_the_shape_and_the_understood_ones",
        ],
    ),
    "core-sensor-window": (["edge_agent/core/sensor/window.py"], ["tests/core/sensor/test_window.py"]),
    "core-web-request": (
        ["edge_agent/core/web/request_limits.py"],
        ["tests/core/web/test_request_limits.py"],
    ),
    "core-scene-edit": (["edge_agent/core/web/scene_edit.py"], ["tests/core/web/test_scene_edit.py"]),
    "core-label-layout": (
        ["edge_agent/core/vision/label_layout.py"],
        ["tests/app/workbench/test_annotate_layout.py", "tests/core/vision/test_label_layout.py"],
    ),
    "tools-progress": (["edge_agent/tools/progress.py"], ["tests/tools/test_progress_and_deps.py"]),
    # in process on tiny models (test_validate_any.py's CLI subprocesses are "no tests" to mutmut)
    "tools-validate": (["edge_agent/tools/validate.py"], ["tests/tools/test_validate_models.py"]),
    "tools-quantize-dynamic": (
        ["edge_agent/tools/quantize_dynamic.py"],
        ["tests/tools/test_quantize_dynamic_inproc.py"],
    ),
    # no function bodies: mutmut 3 mutates inside functions and methods only, so these give no
    # mutants (exception classes; a dataclass of default limits): the area records that
    "core-plain-data": (
        ["edge_agent/errors.py", "edge_agent/core/vision/thresholds.py"],
        ["tests/core/vision/test_metrics_rules.py"],
    ),
    # --- lead ---
    # issue 36: the annotated frames' drawing (infer --save, --track --save, the page's live view)
    "app-annotate": (
        ["edge_agent/app/workbench/annotate.py", "edge_agent/app/workbench/annotate_tracks.py"],
        [
            "tests/app/workbench/test_annotate_detections.py",
            "tests/app/workbench/test_annotate_layout.py",
            "tests/app/workbench/test_annotate_tracks_pixels.py",
            "tests/app/workbench/test_annotate_files.py",
            "tests/app/workbench/test_annotate_tracks_bite.py",  # issue 36: the tracks' survivors
        ],
    ),
    # --- h-mutd ---
    # issue 36: the CLI's small modules, the web access rules, the collector's round figures, the
    # MQTT confirms and session, the scene save: none had a score; each on its pure, fast tests
    "cli-argtypes": (
        ["edge_agent/app/cli/argtypes.py"],
        ["tests/app/cli/test_argtypes.py", "tests/app/cli/test_thread_bound.py"],
    ),
    "cli-state-check": (
        ["edge_agent/app/cli/state_check.py"],
        ["tests/app/cli/test_state_check.py", "tests/app/cli/test_state_check_bite.py"],
    ),
    # test_logsetup.py's journald runs are subprocesses (no credit): the bite file calls it in process
    "cli-logsetup": (
        ["edge_agent/app/cli/logsetup.py"],
        ["tests/app/cli/test_logsetup.py", "tests/app/cli/test_logsetup_bite.py"],
    ),
    "cli-status": (
        ["edge_agent/app/cli/status_cmd.py"],
        [
            "tests/app/cli/test_status_view.py",
            "tests/app/cli/test_status_cmd_bite.py",
            "tests/app/cli/test_cli_help.py",
            "tests/app/cli/test_cli_manners.py::test_every_option_of_every_command_has_help",
            "tests/app/cli/test_cli_manners.py::test_help_shows_defaults_and_no_markup",
        ],
    ),
    # not test_queue_cli.py (subprocesses, no credit) nor its drain tests (a broker per mutant)
    "cli-queue": (
        ["edge_agent/app/cli/queue_cmd.py"],
        [
            "tests/app/cli/test_queue_cmd_inproc.py",
            "tests/app/cli/test_queue_cmd_bite.py",  # issue 36 (h-mutl): the drain's status, the export's failures
            "tests/app/cli/test_cli_help.py",
            "tests/app/cli/test_cli_manners.py::test_every_option_of_every_command_has_help",
            "tests/app/cli/test_cli_manners.py::test_help_shows_defaults_and_no_markup",
        ],
    ),
    # --- h-mute ---
    # issue 36: a sensor model's spec (metadata + [[sensor_models]]) and one window through it
    "inference-sensor": (
        ["edge_agent/inference/sensor_model.py"],
        ["tests/inference/test_sensor_model.py", "tests/inference/test_sensor_model_rules.py"],
    ),
    # issue 36: the agent's sensor loop (windows in, results out), on its pure test
    "agent-sensor": (
        ["edge_agent/app/agent/sensor_inference.py"],
        ["tests/app/agent/test_sensor_inference.py", "tests/app/agent/test_sensor_inference_bite.py"],
    ),
    # --- h-muth ---
    # issue 36: confirm = "collector" on the device (subscribe, apply, the silence warning), on its
    # pure test (a real outbox, a moved clock; test_sync_confirm.py's broker runs add no kills)
    "mqtt-confirms": (
        ["edge_agent/adapters/mqtt/confirms.py"],
        ["tests/adapters/mqtt/test_confirms_rules.py"],
    ),
    # issue 36: the page editor's save (check, drop-in, live apply), on a built agent that is not
    # running (its call_in_loop run inline): no web server, no loop thread
    "web-scene-save": (
        ["edge_agent/app/web/scene_save.py"],
        ["tests/app/web/test_scene_save_rules.py"],
    ),
    # issue 36: one sync connection's bookkeeping and paho callbacks, on the pure tests (the
    # broker tests of test_sync_session.py run it on paho's thread and add minutes)
    "mqtt-session": (
        ["edge_agent/adapters/mqtt/session.py"],
        [
            "tests/adapters/mqtt/test_session_rules.py",
            "tests/adapters/mqtt/test_sync_session.py::test_a_puback_handled_before_publish_returned_is_matched_when_the_mid_is_known",
            "tests/adapters/mqtt/test_sync_session.py::test_a_batch_mid_carries_all_its_rows_and_counts_as_one_batch_in_flight",
        ],
    ),
    # --- h-mutg ---
    # issue 36: a round's Outcome sums and the collector's /metrics counters, on pure tests
    "collector-round-stats": (
        ["edge_agent/app/collector/round_stats.py"],
        ["tests/app/collector/test_round_stats.py", "tests/core/messages/test_fleet_metrics.py"],
    ),
    # issue 36: the device page's token file, Host check and CSRF-safe writes, on pure tests
    "web-access": (
        ["edge_agent/adapters/web/access.py"],
        ["tests/adapters/web/test_access.py", "tests/adapters/web/test_access_rules.py"],
    ),
    # issue 36: `config example|check`, in process (the subprocess tests of test_commands.py earn nothing)
    "cli-config": (
        ["edge_agent/app/cli/config_cmd.py"],
        ["tests/app/cli/test_config_check.py", "tests/app/cli/test_config_cmd_inproc.py"],
    ),
    # --- h-mutf ---
    # issue 36: the serial reader thread (pty and loop:// ports, lines, garbage, reconnects)
    "sensor-serial": (
        ["edge_agent/adapters/sensor/serial_reader.py"],
        # not tests/adapters/camera/test_bounded_input.py: its serial test streams 8 MB of noise (17 s
        # per mutant); test_sensor_serial.py covers the 4 KiB bound with a stand-in port
        [
            "tests/adapters/sensor/test_sensor_serial.py",
            "tests/adapters/sensor/test_sensor_serial_bite.py",  # issue 36: stats, backoff, line bound
        ],
    ),
    # issue 36: the broker's enrollment directory (modes, kept passwords, refused files)
    "broker-dir": (
        ["edge_agent/adapters/broker/broker_dir.py"],
        ["tests/adapters/broker/test_broker_dir.py", "tests/adapters/broker/test_broker_dir_bite.py"],
    ),
    # --- lead (stop 44) ---
    # issue 33: the collector's two threads (parse round n+1 while round n is stored) and its loop
    "collector-overlap": (
        ["edge_agent/app/collector/overlap.py"],
        ["tests/app/collector/test_overlap.py", "tests/app/collector/test_collector_run.py"],
    ),
    # issue 36: the collector's housekeeping (history expiry/thinning, retention, per-device metrics)
    "collector-maintenance": (
        ["edge_agent/app/collector/maintenance.py"],
        ["tests/app/collector/test_maintenance.py", "tests/app/collector/test_maintenance_bite.py"],
    ),
    "collector-loop": (
        ["edge_agent/app/collector/loop.py"],
        [
            "tests/app/collector/test_collector_run.py",
            "tests/app/collector/test_collector_round.py",
            "tests/app/collector/test_collector_guard.py",
            "tests/app/collector/test_no_ack_on_failed_commit.py",
            "tests/app/collector/test_poison_message.py",
            # issue 36 (h-mutt): the subscriber's settings, run's start/stop, the round's figures,
            # the failing store's lines, backoff and dead letters, the guard's log keys
            "tests/app/collector/test_loop_bite.py",
            "tests/app/collector/test_loop_store_bite.py",
            # a PostgreSQL cluster with a password (its own, ~2 s): the password, reconnections
            "tests/app/collector/test_loop_reopen_bite.py",
        ],
    ),
    # --- h-mutk ---
    # issue 36: the collector's trust rules one module at a time, each on its own database tests
    # (SQLite + PostgreSQL); run them under .ci/with_pg.py (one server for the run, not a cluster per
    # test module and mutant: 4-7 s each) with --jobs 1 (every test empties that server's schema)
    "collector-trust-rules": (
        ["edge_agent/adapters/collector/trust.py"],
        [
            "tests/adapters/collector/test_collector_trust.py",
            "tests/adapters/collector/test_trust_bite.py",
            "tests/adapters/collector/test_trust_rules.py",  # dead letters, > CHUNK devices
        ],
    ),
    "collector-statuses": (
        ["edge_agent/adapters/collector/statuses.py"],
        [
            "tests/adapters/collector/test_statuses_bite.py",
            "tests/adapters/collector/test_collector_trust.py",
            *(  # in process: the newest status's figures, last_seen, the online count
                f"tests/adapters/collector/test_collector_db.py::{t}"
                for t in (
                    "test_the_newest_status_wins_and_a_last_will_counts_at_its_arrival",
                    "test_last_seen_never_goes_back",
                    "test_a_draining_device_is_online_and_its_newer_status_replaces_every_figure",
                    "test_counters_of_a_device_are_its_last_status_figures",
                )
            ),
        ],
    ),
    "collector-confirmed": (
        ["edge_agent/adapters/collector/confirmed.py"],
        [
            "tests/adapters/collector/test_confirmed.py",
            "tests/adapters/collector/test_confirmed_model.py",  # every round against a model
            "tests/adapters/collector/test_collector_trust.py",
            "tests/adapters/collector/test_confirmed_bite.py",  # publish: retained, QoS 1, counted
            "tests/adapters/collector/test_copy_stream.py",  # plan() / Early in the COPY (2026-12-07)
        ],
    ),
    # CollectorDb itself (the class around the modules above); not test_collector_db.py's two
    # `fleet` tests (subprocesses: 18-20 s each, no credit) nor test_db_urls.py's three that start
    # their own cluster (the `postgres` fixture)
    "collector-db": (
        ["edge_agent/adapters/collector/db.py"],
        [
            *(
                f"tests/adapters/collector/test_collector_db.py::{t}"
                for t in (
                    "test_migrations_are_applied_once_and_a_newer_schema_is_refused",
                    "test_redeliveries_are_counted_not_stored_and_gaps_are_seen",
                    "test_the_newest_status_wins_and_a_last_will_counts_at_its_arrival",
                    "test_a_schema_one_version_ahead_is_refused",
                    "test_last_seen_never_goes_back",
                    "test_a_retired_device_is_still_known_by_its_kept_results",
                    "test_a_gap_in_the_migration_numbers_is_an_error",
                    "test_a_draining_device_is_online_and_its_newer_status_replaces_every_figure",
                    "test_counters_of_a_device_are_its_last_status_figures",
                    "test_a_sqlite_commit_is_durable_before_the_ack",
                )
            ),
            *(
                f"tests/adapters/collector/test_db_urls.py::{t}"
                for t in (
                    "test_three_slashes_is_a_path_relative_to_the_working_directory",
                    "test_four_slashes_is_an_absolute_path",
                    "test_a_bad_form_is_one_line_from_the_adapter",
                    "test_a_bad_form_is_one_line_from_the_config_file",
                    "test_each_good_form_is_taken_by_the_config_file_as_written",
                )
            ),
            "tests/adapters/collector/test_collector_camera_db.py",
            "tests/adapters/collector/test_collector_trust.py",
            "tests/adapters/collector/test_trust_rules.py",
            "tests/adapters/collector/test_confirmed.py",
            "tests/adapters/collector/test_db_rules.py",  # errors, dead letters, retire, the reads
            "tests/adapters/collector/test_db_bite.py",  # no psycopg, arrival order, commits, retire
            # the UniqueViolation redo (its own cluster: only store's mutants pay for it)
            "tests/adapters/collector/test_ingest_paths.py::test_a_key_another_writer_took_meanwhile_makes_the_round_redo_staged",
        ],
    ),
    # --- h-muti ---
    # issue 36: the collector's schema files (numbering, which files count, statements), no database
    "collector-migrations": (
        ["edge_agent/adapters/collector/migrations.py"],
        ["tests/adapters/collector/test_migrations_rules.py"],
    ),
    # issue 36: the message retention's batches and spans, on SQLite and a PostgreSQL cluster of the
    # test process (its ~7 s start is paid only by mutants the SQLite cases do not kill first: -x)
    "collector-purge": (
        ["edge_agent/adapters/collector/purge.py"],
        [
            "tests/adapters/collector/test_purge_bite.py",
            "tests/adapters/collector/test_retention.py",
            "tests/adapters/collector/test_known.py::test_the_purge_makes_the_next_round_read",
        ],
    ),
    # issue 36: PostgreSQL's day partitions (names, bounds, conversion, days ahead, whole-day drops);
    # the pure name/bound tests first, so their mutants die before the cluster starts
    "collector-partitions": (
        ["edge_agent/adapters/collector/partitions.py"],
        [
            "tests/adapters/collector/test_partitions_bite.py",
            "tests/adapters/collector/test_retention.py::test_postgresql_partitioned_by_day_drops_old_partitions",
            "tests/adapters/collector/test_known.py::test_a_partition_drop_makes_the_next_round_read",
        ],
    ),
    # issue 36: the health history table and the fleet-wide reads, on SQLite and PostgreSQL
    "collector-history": (
        ["edge_agent/adapters/collector/history.py"],
        ["tests/adapters/collector/test_history.py", "tests/adapters/collector/test_history_bite.py"],
    ),
    # --- h-mutj ---
    # issue 36: the rollout tables (SQLite and a real PostgreSQL per test module)
    "collector-rollouts": (
        ["edge_agent/adapters/collector/rollouts.py"],
        [
            "tests/adapters/collector/test_rollouts_db.py",
            "tests/adapters/collector/test_rollouts_bite.py",  # issue 36: the listing's bound, the PG line
        ],
    ),
    # issue 36: the cache of a device's highest seq and islands (pure rules + a real PostgreSQL)
    "collector-known": (
        ["edge_agent/adapters/collector/known.py"],
        # test_known.py's other tests store 60 PostgreSQL rounds and more per mutant of plan() /
        # around() (every round calls them) for nothing the pure tests and these two miss
        [
            "tests/adapters/collector/test_known_bite.py",  # issue 36: plan, proven, keep, forget
            "tests/adapters/collector/test_known.py::test_around_answers_only_for_what_the_tail_holds_whole",
            "tests/adapters/collector/test_known.py::test_after_needs_a_read_only_when_a_full_boot_lost_islands",
            "tests/adapters/collector/test_known.py::test_a_device_only_this_collector_writes_is_not_read_again",
            "tests/adapters/collector/test_known.py::test_the_purge_makes_the_next_round_read",
        ],
    ),
    # issue 36: the PostgreSQL round's reads, COPY and staging path (a real PostgreSQL); not
    # test_known.py: a second cluster per mutant (10-15 s on the loaded machine) for the same paths
    "collector-ingest": (
        ["edge_agent/adapters/collector/ingest.py"],
        [
            "tests/adapters/collector/test_ingest_paths.py",
            "tests/adapters/collector/test_copy_stream.py",  # copy_data, copy_pg's idle (2026-12-07)
        ],
    ),
    # --- h-mutm ---
    # issue 36: the device page's HTTP server (routes, refusals, the body bound, HEAD, headers) on
    # a real loopback socket in process (its handler runs on the server's thread: mutmut reaches it)
    "web-page-server": (
        ["edge_agent/adapters/web/page_server.py"],
        ["tests/adapters/web/test_page_server.py", "tests/adapters/web/test_page_server_bite.py"],
    ),
    # issue 36: the page's routes on a built agent that is not running (no server, no loop thread)
    "web-routes": (
        ["edge_agent/app/web/web_routes.py"],
        ["tests/app/web/test_event_log.py", "tests/app/web/test_web_routes_rules.py"],
    ),
    # issue 36: the live view's observer, cache and drawing, frames handed in by the test
    "web-live-view": (
        ["edge_agent/app/web/live_view.py"],
        ["tests/app/web/test_live_view_rules.py"],
    ),
    # issue 36: POST /api/v1/infer's gate and answer on the demo detector, in process
    "web-infer-api": (
        ["edge_agent/app/web/infer_api.py"],
        ["tests/app/web/test_infer_api_rules.py"],
    ),
    # issue 36: [web] started on a built agent (token, bind, port taken, the result chain)
    "web-app": (
        ["edge_agent/app/web/web_app.py"],
        ["tests/app/web/test_web_app_rules.py"],
    ),
    # issue 36: the tracks' drawing alone (app-annotate has it beside annotate.py: 80.2 %), on the
    # pixel and layout tests and the drawing's measured strokes
    "app-annotate-tracks": (
        ["edge_agent/app/workbench/annotate_tracks.py"],
        [
            "tests/app/workbench/test_annotate_tracks_pixels.py",
            "tests/app/workbench/test_annotate_layout.py",
            "tests/app/workbench/test_annotate_tracks_bite.py",
        ],
    ),
    # --- h-mutn ---
    # issue 36: `bench` (images, tensors, --sensor) and its noisy-row note, in process
    "app-bench": (
        ["edge_agent/app/workbench/bench_cmd.py", "edge_agent/app/workbench/bench_sensor.py"],
        [
            "tests/tools/test_bench.py",
            "tests/app/workbench/test_bench_note.py",
            "tests/tools/test_tensor_models.py::test_bench_times_a_token_model_and_a_sensor_model",
            "tests/app/workbench/test_bench_inproc.py",
        ],
    ),
    # issue 36: `inspect` (detector, classifier, tensor and sensor models), in process
    "app-inspect": (
        ["edge_agent/app/workbench/inspect_cmd.py"],
        [
            "tests/adapters/runtime/test_model_info.py",
            "tests/tools/test_model_convert.py::test_inspect_names_ir_opset_and_the_oldest_runtime",
            "tests/app/workbench/test_inspect_inproc.py",
            "tests/app/workbench/test_inspect_bite.py",
        ],
    ),
    # issue 36: `model convert` (lowered, validated, written only when it passes), in process
    "app-convert": (
        ["edge_agent/app/workbench/convert_cmd.py"],
        [
            "tests/tools/test_model_convert.py::test_cli_converts_validates_and_refuses",
            "tests/tools/test_model_convert.py::test_cli_writes_the_converted_model_through_the_durable_helper",
            "tests/app/workbench/test_model_cmd_flags.py",
            "tests/app/workbench/test_convert_inproc.py",
            "tests/app/workbench/test_convert_bite.py",
        ],
    ),
    # issue 36: `infer --sensor` (truths, accuracy, the time column, score/regress rows), in process
    "app-infer-sensor": (
        ["edge_agent/app/workbench/infer_sensor.py"],
        ["tests/app/workbench/test_infer_sensor_inproc.py", "tests/app/workbench/test_infer_sensor_bite.py"],
    ),
    # issue 36: `export-check`'s command line, without torch (the dev venv has none): the export
    # itself is tools/export_check.py's (tests/tools/test_export_check.py, where torch is installed)
    "app-export-check": (
        ["edge_agent/app/workbench/export_check_cmd.py"],
        ["tests/app/workbench/test_export_check_cmd.py"],
    ),
    # --- h-mutv ---
    # issue 36: the PyTorch -> ONNX export check itself; its tests skip without torch, so the figure
    # needs torch in the venv that runs this script (docs/testing.md: a venv of its own with torch)
    "tools-export-check": (
        ["edge_agent/tools/export_check.py"],
        [
            "tests/tools/test_export_check.py",
            "tests/tools/test_export_check_parts.py",
            "tests/tools/test_export_check_bite.py",  # from the first run's survivors
            "tests/tools/test_export_check_bite2.py",  # h-mutw: the second run's survivors
        ],
    ),
    # --- h-muto ---
    # issue 36: `quantize` and `validate` on images, in process through main(argv) on the toy detector
    # (test_shared_yolov8n.py's shared models add minutes per mutant; the CLI subprocesses earn nothing)
    "app-quantize-validate": (
        ["edge_agent/app/workbench/quantize_cmd.py", "edge_agent/app/workbench/validate_cmd.py"],
        # every test here builds the whole parser, so each of register's ~290 mutants runs them all:
        # the help and bite files first, and of the older files only the quantize / validate tests
        [
            "tests/app/workbench/test_quantize_validate_help.py",
            "tests/app/cli/test_cli_help.py",
            "tests/app/cli/test_cli_manners.py::test_every_option_of_every_command_has_help",
            "tests/app/cli/test_cli_manners.py::test_help_shows_defaults_and_no_markup",
            "tests/app/workbench/test_quantize_validate_bite.py",
            "tests/app/workbench/test_quantize_cmd_bite.py",
            "tests/app/workbench/test_model_cmd_flags.py::test_quantize_flags_reach_the_model",
            "tests/app/workbench/test_model_cmd_flags.py::test_quantize_validates_on_val_max_images_of_val",
            "tests/app/workbench/test_model_cmd_flags.py::test_quantize_defaults_take_every_calibration_image_up_to_128_and_the_full_range",
            "tests/app/workbench/test_model_cmd_flags.py::test_an_output_that_is_the_input_is_refused_and_the_input_kept",
            "tests/tools/test_quantize.py::test_quantize_command_validates_and_passes",
            "tests/tools/test_quantize.py::test_naive_quantization_is_refused_and_renamed",
            "tests/tools/test_quantize.py::test_validate_command_exit_codes_and_json",
            "tests/tools/test_quantize.py::test_helpers_for_paths_and_samples",
            "tests/tools/test_quantize.py::test_a_failed_run_leaves_no_file_under_the_output_name",
        ],
    ),
    # issue 36: `quantize` and `validate` of sensor models (--calib / --sensor RECORDING), in process
    # (test_infer_sensor.py runs them as subprocesses: no credit)
    "app-sensor-quantize-validate": (
        ["edge_agent/app/workbench/quantize_sensor.py", "edge_agent/app/workbench/validate_sensor.py"],
        [
            "tests/app/workbench/test_sensor_validate_inproc.py",
            "tests/app/workbench/test_sensor_quantize_validate_bite.py",
        ],
    ),
    # --- h-mutp ---
    # issue 36: `model pack|keygen`, in process through main(argv) (test_model_cli_manners.py and
    # the package fixtures run `python -m edge_agent model pack`: no credit)
    "model-pack-cmd": (
        ["edge_agent/app/updates/pack_cmd.py"],
        [
            "tests/app/updates/test_model_pack_cmd.py",
            "tests/app/updates/test_model_pack_cmd_bite.py",  # issue 36: the first run's survivors
            "tests/app/cli/test_cli_help.py",
            "tests/app/cli/test_cli_manners.py::test_every_option_of_every_command_has_help",
            "tests/app/cli/test_cli_manners.py::test_help_shows_defaults_and_no_markup",
        ],
    ),
    # issue 36: the receiver's message handling (begin, chunks, the floor, assembly), on its
    # in-process tests; not test_receiver.py's hypothesis test (29 s, reaches every mutant of handle)
    "model-intake": (
        ["edge_agent/adapters/updates/intake.py"],
        [
            "tests/adapters/updates/test_receiver_rules.py",
            "tests/adapters/updates/test_receiver_cancel.py",
            "tests/adapters/updates/test_intake_bite.py",  # issue 36 (h-mutu): the first run's survivors
            "tests/adapters/updates/test_receiver.py::test_an_unsigned_or_badly_signed_begin_writes_nothing",
            "tests/adapters/updates/test_receiver.py::test_chunks_without_a_begin_and_empty_or_wrong_sized_chunks_are_never_stored",
            "tests/adapters/updates/test_receiver.py::test_storage_is_capped_in_count_and_bytes",
            "tests/adapters/updates/test_receiver.py::test_a_transfer_silent_for_a_day_expires",
            "tests/adapters/updates/test_receiver.py::test_bad_state_on_disk_is_discarded_at_start_with_one_line",
            "tests/adapters/updates/test_receiver.py::test_a_reused_transfer_id_with_other_content_starts_over",
            "tests/adapters/updates/test_receiver.py::test_resume_after_restart_counts_the_chunks_on_disk",
            "tests/adapters/updates/test_receiver.py::test_force_from_the_sender_never_reaches_the_inbox",
            "tests/adapters/updates/test_receiver.py::test_an_unexpected_error_is_counted_and_does_not_escape",
            "tests/adapters/updates/test_receiver.py::test_chunks_are_written_with_fsync_then_rename",
            "tests/adapters/updates/test_receiver.py::test_the_receiver_thread_is_supervised",
            "tests/adapters/updates/test_receiver.py::test_the_floor_is_the_larger_of_its_two_keys_plus_the_queue_reserve_on_the_same_disk",
            "tests/adapters/updates/test_receiver.py::test_a_chunk_is_stored_only_while_the_floor_stays_free",
            "tests/adapters/updates/test_receiver.py::test_a_transfer_stops_at_the_floor_on_a_real_small_disk",
        ],
    ),
    # issue 36: `model rollout` and its steps, in process (test_model_rollout*.py run it as a child:
    # no credit): arguments, --status / --resume on SQLite, whole rollouts to simulated devices.
    # Two areas: every test passes through rollout_cmd's register_under (help texts), so its
    # survivors run them all; rollout_run's mutants only meet the tests that reach them
    "model-rollout-run": (
        ["edge_agent/app/updates/rollout_run.py"],
        [
            "tests/app/updates/test_model_rollout_inproc.py",
            "tests/app/updates/test_model_rollout_done_bite.py",
            "tests/app/updates/test_rollout_run_bite.py",
        ],
    ),
    "model-rollout-cmd": (
        ["edge_agent/app/updates/rollout_cmd.py"],
        [
            "tests/app/updates/test_model_rollout_inproc.py",
            "tests/app/updates/test_model_rollout_done_bite.py",
            "tests/app/updates/test_model_rollout_status_bite.py",
            "tests/app/updates/test_rollout_cmd_bite.py",
            "tests/app/cli/test_cli_help.py",
            "tests/app/cli/test_cli_manners.py::test_every_option_of_every_command_has_help",
            "tests/app/cli/test_cli_manners.py::test_help_shows_defaults_and_no_markup",
        ],
    ),
    # --- h-mutl ---
    # issue 36: the dispatcher (flags, help formatting, exit statuses, Ctrl-C) and the demo assets'
    # lookup, in process (test_cli_manners.py's and test_ctrl_c.py's subprocesses earn nothing)
    "cli-main": (
        ["edge_agent/app/cli/main.py", "edge_agent/app/cli/assets.py"],
        [
            "tests/app/cli/test_cli_main_bite.py",
            "tests/app/cli/test_cli_help.py",
            "tests/app/cli/test_cli_manners.py::test_every_option_of_every_command_has_help",
            "tests/app/cli/test_cli_manners.py::test_help_shows_defaults_and_no_markup",
            "tests/app/cli/test_cli_manners.py::test_an_os_error_no_command_named_is_still_one_line_and_exit_1",
            "tests/app/cli/test_ctrl_c.py::test_an_interrupt_while_the_commands_import_is_caught_by_main",
            "tests/app/cli/test_ctrl_c.py::test_an_interrupt_inside_a_compiled_modules_init_is_an_interrupt_too",
        ],
    ),
    # issue 36: `doctor` in process on fake /proc and /dev trees, the demo model, the sample folder and
    # a real mosquitto (test_doctor.py runs it as a subprocess: "no tests" for every function)
    "cli-doctor": (
        ["edge_agent/app/cli/doctor_cmd.py"],
        [
            "tests/app/cli/test_doctor_inproc.py",
            "tests/app/cli/test_doctor_bite.py",  # from the first run's survivors: help, no --root, one open
            "tests/app/cli/test_doctor.py::test_a_v4l2_camera_far_above_the_model_gets_a_capture_size_hint_not_a_change",
        ],
    ),
    # issue 36: the HTTP MJPEG source against local servers (a scripted one for each refusal and each
    # way a stream ends); not the Camera tests of test_mjpeg.py (reconnect waits, capture.py's area)
    "camera-mjpeg-http": (
        ["edge_agent/adapters/camera/mjpeg_http.py"],
        [
            "tests/adapters/camera/test_mjpeg_http_bite.py",
            "tests/adapters/camera/test_mjpeg.py::test_decode_jpeg_at_half_scale_reports_the_full_size",
            "tests/adapters/camera/test_mjpeg.py::test_frames_arrive_in_order",
            "tests/adapters/camera/test_mjpeg.py::test_basic_auth_from_a_credential_file",
            "tests/adapters/camera/test_mjpeg.py::test_a_truncated_jpeg_is_skipped_and_the_stream_goes_on",
            "tests/adapters/camera/test_mjpeg.py::test_a_read_hands_out_the_newest_part_not_a_stale_one",
            "tests/adapters/camera/test_mjpeg.py::test_the_configured_pixel_cap_is_the_one_applied",
            "tests/adapters/camera/test_mjpeg.py::test_the_query_string_reaches_the_server",
            "tests/adapters/camera/test_decode_bounds.py::test_decode_refuses_a_jpeg_without_a_frame_header",
        ],
    ),
    # issue 36: the capture thread on scripted sources (every counter, state, last_error and log line)
    # and FakeDevice (camera-capture above runs all of test_camera.py: too long a run); not its file/folder/video tests (real decodes, seconds each) nor
    # test_capture_rate.py (4 s; the rate's arithmetic is pinned on given timestamps instead)
    "camera-capture-scripted": (
        ["edge_agent/adapters/camera/capture.py"],
        [
            "tests/adapters/camera/test_capture_bite.py",
            "tests/adapters/camera/test_capture_defaults_bite.py",  # from the first run's survivors
            "tests/adapters/camera/test_camera_restart.py",
            "tests/adapters/camera/test_camera.py::test_latest_frame_slot",
            "tests/adapters/camera/test_camera.py::test_live_source_keeps_only_the_newest_frame",
            "tests/adapters/camera/test_camera.py::test_stall_is_detected_and_recovered",
            "tests/adapters/camera/test_camera.py::test_frozen_stream_and_failed_reads_trigger_reconnect",
            "tests/adapters/camera/test_camera.py::test_unplugged_device_backs_off_then_recovers",
            "tests/adapters/camera/test_camera.py::test_live_source_absent_at_start_is_retried_then_gives_up_when_capped",
            "tests/adapters/camera/test_camera.py::test_an_unexpected_error_in_a_live_source_reconnects_instead_of_ending_the_thread",
            "tests/adapters/camera/test_camera.py::test_a_frozen_stream_is_the_repeat_limit_or_the_stall_timeout_whichever_comes_first",
            "tests/adapters/camera/test_camera.py::test_a_finished_folder_still_hands_out_its_last_frame",
        ],
    ),
    # --- h-mutu ---
    # issue 36: `fleet retention` / `fleet db partition` in process through main(argv) on SQLite and
    # PostgreSQL (test_retention_cmd.py and test_retention_e2e.py run `edge-agent` as a child: no
    # credit); run under .ci/with_pg.py (one cluster for the run)
    "collector-retention-cmd": (
        ["edge_agent/app/collector/retention_cmd.py"],
        [
            "tests/app/collector/test_retention_cmd_bite.py",
            "tests/app/cli/test_cli_help.py",
            "tests/app/cli/test_cli_manners.py::test_every_option_of_every_command_has_help",
            "tests/app/cli/test_cli_manners.py::test_help_shows_defaults_and_no_markup",
        ],
    ),
    # issue 36: `fleet enroll|revoke` in process (test_enroll_cmd.py runs them as a child: no credit)
    "collector-enroll-cmd": (
        ["edge_agent/app/collector/enroll_cmd.py"],
        [
            "tests/app/collector/test_enroll_cmd_bite.py",
            "tests/app/cli/test_cli_help.py",
            "tests/app/cli/test_cli_manners.py::test_every_option_of_every_command_has_help",
            "tests/app/cli/test_cli_manners.py::test_help_shows_defaults_and_no_markup",
        ],
    ),
    # issue 36: `collect`'s wiring around a stand-in Collector (signals, /metrics, the leave's
    # report) and its settings (test_collect_cmd.py and test_collect_leave.py run it as a child)
    "collector-collect-cmd": (
        ["edge_agent/app/collector/collect_cmd.py"],
        [
            "tests/app/collector/test_collect_cmd_wiring.py",
            "tests/app/collector/test_collect_cmd_bite.py",
            "tests/app/cli/test_cli_help.py",
            "tests/app/cli/test_cli_manners.py::test_every_option_of_every_command_has_help",
            "tests/app/cli/test_cli_manners.py::test_help_shows_defaults_and_no_markup",
        ],
    ),
}

# areas whose tests skip without a package: a run without it would score the skips, so it refuses
NEEDS: dict[str, str] = {"tools-export-check": "torch"}

# environment of an area's mutmut run, read by libraries as they load (mutmut's parent and the
# mutants it forks). tools-export-check: measured (h-mutw) that a child forked from a process whose
# torch ran a 2-thread op hangs at 0 % CPU in its first multi-threaded op (libgomp's pool threads
# are not copied by fork; the child waits on a futex for them). mutmut's parent runs every test
# before it forks, and time_runtimes calls torch.set_num_threads(2 or 3) in parent and child, so
# OMP_NUM_THREADS=1 and a fixture going back to 1 thread did not help; OMP_THREAD_LIMIT=1 caps every
# OpenMP team (torch, MKL, oneDNN) at one thread, so no pool exists to lose; get_num_threads() still
# reports what was set
ENV: dict[str, dict[str, str]] = {"tools-export-check": {"OMP_THREAD_LIMIT": "1"}}

# mypy strict is a gate of CI (.ci/run): a mutant it rejects can never land, so mutmut runs it
# over the mutated copy first and counts what it rejects as "caught by type check" (killed); this
# interpreter's mypy, so a run works without the venv on PATH
TYPE_CHECK = [
    sys.executable,
    "-m",
    "mypy",
    "edge_agent",
    "--output",
    "json",
    "--no-warn-unused-ignores",
    "--disable-error-code",
    "no-redef",
]

LINE = re.compile(r"^\s*(edge_agent\.[\w.]+?)\.(x_\w+|xǁ\w+ǁ\w+)__mutmut_\d+: (.+)$")


def copy_tree(dst: Path) -> None:
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for raw in files:
        if not raw:
            continue
        rel = Path(os.fsdecode(raw))
        src = REPO / rel
        if not src.is_file() or rel.parts[0] == "cross-build":
            continue
        out = dst / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        if not out.exists() or out.read_bytes() != src.read_bytes():
            shutil.copy2(src, out)


def configure(dst: Path, modules: list[str], tests: list[str]) -> None:
    text = (REPO / "pyproject.toml").read_text()
    extra = f"only_mutate = {modules!r}\npytest_add_cli_args_test_selection = {tests!r}\n"
    extra += f"type_check_command = {TYPE_CHECK!r}\n"
    text = text.replace("[tool.mutmut]\n", "[tool.mutmut]\n" + extra.replace("'", '"'), 1)
    (dst / "pyproject.toml").write_text(text)


def score(dst: Path, counts: dict[str, dict[str, int]] | None = None) -> int:
    """Print the table of the area's last run; fill ``counts`` (module path -> counts) if given."""
    proc = subprocess.run(
        [sys.executable, "-m", "mutmut", "results", "--all", "true"],
        cwd=dst,
        capture_output=True,
        text=True,
        check=False,
    )
    out = proc.stdout
    per: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    survivors: list[str] = []
    for line in out.splitlines():
        m = LINE.match(line)
        if m:
            per[m.group(1)][m.group(3)] += 1
            if m.group(3) in ("survived", "no tests"):
                survivors.append(f"{line.strip()}")
    if not per:
        # an empty table hides why: say what mutmut answered (no run yet, another python, an error)
        print(f"\nno mutant results from `mutmut results` in {dst} (exit {proc.returncode}):")
        print((proc.stderr or proc.stdout or "(no output)").strip()[-2000:])
        return 1
    print(
        f"\n{'module':42} {'killed':>7} {'by mypy':>7} {'timeout':>7} {'survived':>8} {'no tests':>8} {'other':>6}"
        f" {'score':>6}"
    )
    for mod, c in sorted(per.items()):
        # a segfault is a failed test run too: the mutant was noticed
        killed, typed, timeout = c["killed"] + c["segfault"], c["caught by type check"], c["timeout"]
        # other: not run to an end (suspicious, interrupted): not counted as killed
        total = sum(c.values())
        other = total - killed - typed - timeout - c["survived"] - c["no tests"]
        pct = 100.0 * (killed + typed + timeout) / total if total else 0.0
        print(
            f"{mod:42} {killed:7} {typed:7} {timeout:7} {c['survived']:8} {c['no tests']:8} {other:6} {pct:5.1f}%"
        )
        if counts is not None:
            path = mod.removeprefix("edge_agent.").replace(".", "/") + ".py"
            counts[path] = {
                "killed": killed,
                "by_mypy": typed,
                "timeout": timeout,
                "survived": c["survived"],
                "no_tests": c["no tests"],
                "other": other,
                "total": total,
            }
    if survivors:
        print("\nnot killed (inspect with: cd", dst, "&& mutmut show NAME):")
        print("\n".join(survivors))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("area", nargs="?", choices=sorted(AREAS))
    ap.add_argument("--list", action="store_true", help="print the areas, their modules and tests")
    ap.add_argument("--jobs", type=int, default=2, help="parallel mutant runs (default 2)")
    ap.add_argument("--fresh", action="store_true", help="drop the area's cached mutants first")
    ap.add_argument("--report", action="store_true", help="only print the table of the last run")
    ap.add_argument(
        "--ledger",
        action="store_true",
        help="only regenerate docs/mutation-ledger.md from .ci/mutation-scores.json",
    )
    ap.add_argument(
        "--no-record",
        action="store_true",
        help="do not record this run's figures in .ci/mutation-scores.json",
    )
    ap.add_argument(
        "--only",
        nargs="+",
        default=[],
        metavar="PATTERN",
        help="only the mutants whose names match (fnmatch, e.g. 'edge_agent.adapters.outbox.claims*'): one "
        "module of an area at a time when the whole area does not fit the time (mutmut then rechecks them)",
    )
    args = ap.parse_args()
    if args.ledger:
        print(f"wrote {ledger.write(area_modules()).relative_to(REPO)}")
        return 0
    if args.list or not args.area:
        for name, (mods, tests) in AREAS.items():
            print(f"{name}:\n  mutate: {' '.join(mods)}\n  tests:  {' '.join(tests)}")
        return 0
    dst = REPO / "build" / "mutation" / args.area
    if args.report:
        return score(dst)
    need = NEEDS.get(args.area)
    if need and importlib.util.find_spec(need) is None:
        print(f"{args.area} needs {need} in this interpreter's venv ({sys.executable}); see docs/testing.md")
        return 2
    if args.fresh and dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True, exist_ok=True)
    copy_tree(dst)
    modules, tests = AREAS[args.area]
    configure(dst, modules, tests)
    cmd = [
        "nice",
        "-n",
        "10",
        sys.executable,
        "-m",
        "mutmut",
        "run",
        "--max-children",
        str(args.jobs),
        *args.only,
    ]
    start = time.monotonic()
    rc = subprocess.run(cmd, cwd=dst, check=False, env={**os.environ, **ENV.get(args.area, {})}).returncode
    minutes = (time.monotonic() - start) / 60
    counts: dict[str, dict[str, int]] = {}
    score(dst, counts)
    if rc == 0 and counts and not args.no_record:
        # only the area's own modules: mutmut's cache may still hold results of a module it dropped
        mods = {m.removeprefix("edge_agent/") for m in modules}
        command = " ".join(["python .ci/mutation.py", *map(shlex.quote, sys.argv[1:])])
        ledger.record(
            args.area,
            {m: c for m, c in counts.items() if m in mods},
            date=time.strftime("%Y-%m-%d", time.gmtime()),
            command=command,
            wall_time=f"{minutes:.1f} min (--jobs {args.jobs})",
        )
        print(f"recorded in .ci/mutation-scores.json; wrote {ledger.write(area_modules()).relative_to(REPO)}")
    return rc


def area_modules() -> dict[str, list[str]]:
    return {name: mods for name, (mods, _tests) in AREAS.items()}


if __name__ == "__main__":
    sys.exit(main())
