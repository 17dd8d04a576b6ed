"""The ``__init__`` of each shape of kvplan's record classes, compiled with this module (its bytecode cached like any
module's): ``kvplan.record`` installs the one of a class's shape at the class's first instance, with the class's own
defaults, factories and name. Written by ``python tools/build_record_inits.py`` from ``record._init_source``; do not
edit (tests/test_record_inits.py holds it to the classes and to that text)."""

# ruff: noqa: F821 - the names a function reads (__object_setattr, __MISSING, __factory_<field>) are the globals
# record._install gives it, the class's own

_D = None  # each default's place: the class's own defaults are set on the function when it is installed


def _0(self, catalog_file=_D, gpu=_D, specs=_D, online=_D, calibration=_D, _catalog=_D, _models=_D, _plans=_D, _gpu_labels=_D):
    self.catalog_file = catalog_file
    self.gpu = gpu
    self.specs = __factory_specs() if specs is __MISSING else specs
    self.online = online
    self.calibration = calibration
    self._catalog = _catalog
    self._models = __factory__models() if _models is __MISSING else _models
    self._plans = __factory__plans() if _plans is __MISSING else _plans
    self._gpu_labels = __factory__gpu_labels() if _gpu_labels is __MISSING else _gpu_labels


def _1(self, engine, launcher, line, model=_D, options=_D, others=_D, environment=_D):
    self.engine = engine
    self.launcher = launcher
    self.line = line
    self.model = model
    self.options = __factory_options() if options is __MISSING else options
    self.others = __factory_others() if others is __MISSING else others
    self.environment = __factory_environment() if environment is __MISSING else environment


def _2(self, files, tensors, bytes, params, bytes_by_dtype, params_by_dtype, meta_bytes, packed, notes=_D):
    self.files = files
    self.tensors = tensors
    self.bytes = bytes
    self.params = params
    self.bytes_by_dtype = bytes_by_dtype
    self.params_by_dtype = params_by_dtype
    self.meta_bytes = meta_bytes
    self.packed = packed
    self.notes = __factory_notes() if notes is __MISSING else notes


def _3(self, files=_D, strict=_D, kvplan_version=_D):
    self.files = __factory_files() if files is __MISSING else files
    self.strict = strict
    self.kvplan_version = kvplan_version


def _4(self, key, flag, value, line, unresolved=_D):
    self.key = key
    self.flag = flag
    self.value = value
    self.line = line
    self.unresolved = unresolved


def _5(self, name, file, line, source, model=_D, base_dir=_D, gpus=_D, gpu_count=_D, engine=_D, engine_version=_D, image=_D, settings=_D, requirements=_D, unknowns=_D, notes=_D, host_memory=_D, pods=_D, devices=_D):
    self.name = name
    self.file = file
    self.line = line
    self.source = source
    self.model = model
    self.base_dir = base_dir
    self.gpus = __factory_gpus() if gpus is __MISSING else gpus
    self.gpu_count = gpu_count
    self.engine = engine
    self.engine_version = engine_version
    self.image = image
    self.settings = __factory_settings() if settings is __MISSING else settings
    self.requirements = __factory_requirements() if requirements is __MISSING else requirements
    self.unknowns = __factory_unknowns() if unknowns is __MISSING else unknowns
    self.notes = __factory_notes() if notes is __MISSING else notes
    self.host_memory = host_memory
    self.pods = pods
    self.devices = devices


def _6(self, name, file, line, source, model=_D, gpu=_D, gpu_count=_D, engine=_D, engine_version=_D, tp=_D, pp=_D, dp=_D, kv_dtype=_D, max_model_len=_D, max_num_seqs=_D, kv_cache_bytes_per_gpu=_D, request_kv_bytes=_D, max_model_len_fit=_D, max_concurrency=_D, kv_cache_tokens=_D, findings=_D, assumptions=_D, offload=_D, weights_bytes_per_gpu=_D, fixes=_D, tenant=_D):
    self.name = name
    self.file = file
    self.line = line
    self.source = source
    self.model = model
    self.gpu = gpu
    self.gpu_count = gpu_count
    self.engine = engine
    self.engine_version = engine_version
    self.tp = tp
    self.pp = pp
    self.dp = dp
    self.kv_dtype = kv_dtype
    self.max_model_len = max_model_len
    self.max_num_seqs = max_num_seqs
    self.kv_cache_bytes_per_gpu = kv_cache_bytes_per_gpu
    self.request_kv_bytes = request_kv_bytes
    self.max_model_len_fit = max_model_len_fit
    self.max_concurrency = max_concurrency
    self.kv_cache_tokens = kv_cache_tokens
    self.findings = __factory_findings() if findings is __MISSING else findings
    self.assumptions = __factory_assumptions() if assumptions is __MISSING else assumptions
    self.offload = offload
    self.weights_bytes_per_gpu = weights_bytes_per_gpu
    self.fixes = __factory_fixes() if fixes is __MISSING else fixes
    self.tenant = tenant


def _7(self, out, settings, memory, derived, notes, line_of, tokens):
    self.out = out
    self.settings = settings
    self.memory = memory
    self.derived = derived
    self.notes = notes
    self.line_of = line_of
    self.tokens = tokens


def _8(self, path, format=_D, findings=_D, deployments=_D, skipped=_D):
    self.path = path
    self.format = format
    self.findings = __factory_findings() if findings is __MISSING else findings
    self.deployments = __factory_deployments() if deployments is __MISSING else deployments
    self.skipped = skipped


def _9(self, plan, device, buffers, views, before):
    self.plan = plan
    self.device = device
    self.buffers = buffers
    self.views = views
    self.before = before


def _10(self, spelled, raw, line, names=_D):
    self.spelled = spelled
    self.raw = raw
    self.line = line
    self.names = names


def _11(self, text, line=_D, shell=_D):
    self.text = text
    self.line = line
    self.shell = shell


def _12(self, value, line, spelled, raw=_D):
    self.value = value
    self.line = line
    self.spelled = spelled
    self.raw = raw


def _13(self, severity, code, message, file, line=_D, deployment=_D, value=_D, fits=_D, suggestion=_D, invalid_input=_D):
    self.severity = severity
    self.code = code
    self.message = message
    self.file = file
    self.line = line
    self.deployment = deployment
    self.value = value
    self.fits = fits
    self.suggestion = suggestion
    self.invalid_input = invalid_input
    self.__post_init__()


def _14(self):
    pass


def _15(self, across_requests, across_samples):
    __object_setattr(self, 'across_requests', across_requests)
    __object_setattr(self, 'across_samples', across_samples)


def _16(self, allocated, reserved, driver_used, peak_allocated):
    __object_setattr(self, 'allocated', allocated)
    __object_setattr(self, 'reserved', reserved)
    __object_setattr(self, 'driver_used', driver_used)
    __object_setattr(self, 'peak_allocated', peak_allocated)


def _17(self, allocated, reserved, rounded, unsplit):
    __object_setattr(self, 'allocated', allocated)
    __object_setattr(self, 'reserved', reserved)
    __object_setattr(self, 'rounded', rounded)
    __object_setattr(self, 'unsplit', unsplit)


def _18(self, backend, keys, values, residual_length):
    __object_setattr(self, 'backend', backend)
    __object_setattr(self, 'keys', keys)
    __object_setattr(self, 'values', values)
    __object_setattr(self, 'residual_length', residual_length)


def _19(self, batch, context, kv_dtype, kv_bytes, bytes_per_token, layers=_D, kv_dtype_resolved=_D, sharing=_D, admission_kv_bytes=_D):
    __object_setattr(self, 'batch', batch)
    __object_setattr(self, 'context', context)
    __object_setattr(self, 'kv_dtype', kv_dtype)
    __object_setattr(self, 'kv_bytes', kv_bytes)
    __object_setattr(self, 'bytes_per_token', bytes_per_token)
    __object_setattr(self, 'layers', layers)
    __object_setattr(self, 'kv_dtype_resolved', kv_dtype_resolved)
    __object_setattr(self, 'sharing', sharing)
    __object_setattr(self, 'admission_kv_bytes', admission_kv_bytes)


def _20(self, batch, fits, bytes, allocated):
    __object_setattr(self, 'batch', batch)
    __object_setattr(self, 'fits', fits)
    __object_setattr(self, 'bytes', bytes)
    __object_setattr(self, 'allocated', allocated)


def _21(self, batch, plan, row, measured, tables, timing, decoded, search, predicted_max):
    __object_setattr(self, 'batch', batch)
    __object_setattr(self, 'plan', plan)
    __object_setattr(self, 'row', row)
    __object_setattr(self, 'measured', measured)
    __object_setattr(self, 'tables', tables)
    __object_setattr(self, 'timing', timing)
    __object_setattr(self, 'decoded', decoded)
    __object_setattr(self, 'search', search)
    __object_setattr(self, 'predicted_max', predicted_max)


def _22(self, block, chunk, lag=_D):
    __object_setattr(self, 'block', block)
    __object_setattr(self, 'chunk', chunk)
    __object_setattr(self, 'lag', lag)


def _23(self, block, window, lag=_D):
    __object_setattr(self, 'block', block)
    __object_setattr(self, 'window', window)
    __object_setattr(self, 'lag', lag)


def _24(self, block_size, num_blocks, kv_cache_tokens, max_concurrency, concurrency_per_replica, max_batch, max_context, max_model_len_fit, request_bytes, fits, assumptions=_D, admission_note=_D, state_slots=_D):
    __object_setattr(self, 'block_size', block_size)
    __object_setattr(self, 'num_blocks', num_blocks)
    __object_setattr(self, 'kv_cache_tokens', kv_cache_tokens)
    __object_setattr(self, 'max_concurrency', max_concurrency)
    __object_setattr(self, 'concurrency_per_replica', concurrency_per_replica)
    __object_setattr(self, 'max_batch', max_batch)
    __object_setattr(self, 'max_context', max_context)
    __object_setattr(self, 'max_model_len_fit', max_model_len_fit)
    __object_setattr(self, 'request_bytes', request_bytes)
    __object_setattr(self, 'fits', fits)
    __object_setattr(self, 'assumptions', assumptions)
    __object_setattr(self, 'admission_note', admission_note)
    __object_setattr(self, 'state_slots', state_slots)


def _25(self, block_size, types, group_size, groups_per_type, padding_layers, bytes_per_block, in_flight_batches=_D, state_pages=_D, reserved_blocks=_D):
    __object_setattr(self, 'block_size', block_size)
    __object_setattr(self, 'types', types)
    __object_setattr(self, 'group_size', group_size)
    __object_setattr(self, 'groups_per_type', groups_per_type)
    __object_setattr(self, 'padding_layers', padding_layers)
    __object_setattr(self, 'bytes_per_block', bytes_per_block)
    __object_setattr(self, 'in_flight_batches', in_flight_batches)
    __object_setattr(self, 'state_pages', state_pages)
    __object_setattr(self, 'reserved_blocks', reserved_blocks)


def _26(self, budget_bytes, measured, probes):
    __object_setattr(self, 'budget_bytes', budget_bytes)
    __object_setattr(self, 'measured', measured)
    __object_setattr(self, 'probes', probes)


def _27(self, budget_bytes, weights_bytes, activation_bytes, cudagraph_bytes, non_torch_bytes, kv_cache_bytes):
    __object_setattr(self, 'budget_bytes', budget_bytes)
    __object_setattr(self, 'weights_bytes', weights_bytes)
    __object_setattr(self, 'activation_bytes', activation_bytes)
    __object_setattr(self, 'cudagraph_bytes', cudagraph_bytes)
    __object_setattr(self, 'non_torch_bytes', non_torch_bytes)
    __object_setattr(self, 'kv_cache_bytes', kv_cache_bytes)


def _28(self, buffers, layers, num_blocks=_D, group_size=_D, padding_layers=_D, notes=_D, block_tables=_D):
    __object_setattr(self, 'buffers', buffers)
    __object_setattr(self, 'layers', layers)
    __object_setattr(self, 'num_blocks', num_blocks)
    __object_setattr(self, 'group_size', group_size)
    __object_setattr(self, 'padding_layers', padding_layers)
    __object_setattr(self, 'notes', notes)
    __object_setattr(self, 'block_tables', block_tables)


def _29(self, bytes, formula):
    __object_setattr(self, 'bytes', bytes)
    __object_setattr(self, 'formula', formula)


def _30(self, bytes, formula, assumptions):
    __object_setattr(self, 'bytes', bytes)
    __object_setattr(self, 'formula', formula)
    __object_setattr(self, 'assumptions', assumptions)


def _31(self, bytes, op, held=_D):
    __object_setattr(self, 'bytes', bytes)
    __object_setattr(self, 'op', op)
    __object_setattr(self, 'held', held)


def _32(self, bytes, step_bytes, text):
    __object_setattr(self, 'bytes', bytes)
    __object_setattr(self, 'step_bytes', step_bytes)
    __object_setattr(self, 'text', text)


def _33(self, bytes, what):
    __object_setattr(self, 'bytes', bytes)
    __object_setattr(self, 'what', what)


def _34(self, cal, model, here, total, gpu_total, version, settings, common, notes, used, probe):
    __object_setattr(self, 'cal', cal)
    __object_setattr(self, 'model', model)
    __object_setattr(self, 'here', here)
    __object_setattr(self, 'total', total)
    __object_setattr(self, 'gpu_total', gpu_total)
    __object_setattr(self, 'version', version)
    __object_setattr(self, 'settings', settings)
    __object_setattr(self, 'common', common)
    __object_setattr(self, 'notes', notes)
    __object_setattr(self, 'used', used)
    __object_setattr(self, 'probe', probe)


def _35(self, chunk_size=_D, local_cpu=_D, max_local_cpu_size=_D, local_disk=_D, max_local_disk_size=_D, save_unfull_chunk=_D, save_decode_cache=_D, enable_blending=_D, save_only_first_rank=_D, first_rank_max_local_cpu_size=_D, given=_D, ignored=_D):
    __object_setattr(self, 'chunk_size', chunk_size)
    __object_setattr(self, 'local_cpu', local_cpu)
    __object_setattr(self, 'max_local_cpu_size', max_local_cpu_size)
    __object_setattr(self, 'local_disk', local_disk)
    __object_setattr(self, 'max_local_disk_size', max_local_disk_size)
    __object_setattr(self, 'save_unfull_chunk', save_unfull_chunk)
    __object_setattr(self, 'save_decode_cache', save_decode_cache)
    __object_setattr(self, 'enable_blending', enable_blending)
    __object_setattr(self, 'save_only_first_rank', save_only_first_rank)
    __object_setattr(self, 'first_rank_max_local_cpu_size', first_rank_max_local_cpu_size)
    __object_setattr(self, 'given', given)
    __object_setattr(self, 'ignored', ignored)


def _36(self, command, estimates, plans, fit, gpu):
    __object_setattr(self, 'command', command)
    __object_setattr(self, 'estimates', estimates)
    __object_setattr(self, 'plans', plans)
    __object_setattr(self, 'fit', fit)
    __object_setattr(self, 'gpu', gpu)


def _37(self, component, module, shape, count=_D, linear=_D, fp32=_D):
    __object_setattr(self, 'component', component)
    __object_setattr(self, 'module', module)
    __object_setattr(self, 'shape', shape)
    __object_setattr(self, 'count', count)
    __object_setattr(self, 'linear', linear)
    __object_setattr(self, 'fp32', fp32)


def _38(self, context=_D, context_nvswitch_tp=_D):
    __object_setattr(self, 'context', context)
    __object_setattr(self, 'context_nvswitch_tp', context_nvswitch_tp)


def _39(self, contexts, splits, guessed_context, batches, dtype_names):
    __object_setattr(self, 'contexts', contexts)
    __object_setattr(self, 'splits', splits)
    __object_setattr(self, 'guessed_context', guessed_context)
    __object_setattr(self, 'batches', batches)
    __object_setattr(self, 'dtype_names', dtype_names)


def _40(self, deployment, setting, flag, value, order):
    __object_setattr(self, 'deployment', deployment)
    __object_setattr(self, 'setting', setting)
    __object_setattr(self, 'flag', flag)
    __object_setattr(self, 'value', value)
    __object_setattr(self, 'order', order)


def _41(self, deployments, total_bytes):
    __object_setattr(self, 'deployments', deployments)
    __object_setattr(self, 'total_bytes', total_bytes)


def _42(self, device, item, value, line):
    __object_setattr(self, 'device', device)
    __object_setattr(self, 'item', item)
    __object_setattr(self, 'value', value)
    __object_setattr(self, 'line', line)


def _43(self, dtype, block, model_bytes, tp):
    __object_setattr(self, 'dtype', dtype)
    __object_setattr(self, 'block', block)
    __object_setattr(self, 'model_bytes', model_bytes)
    __object_setattr(self, 'tp', tp)


def _44(self, dtype, block, state_costs, chunked_as_full, lag):
    __object_setattr(self, 'dtype', dtype)
    __object_setattr(self, 'block', block)
    __object_setattr(self, 'state_costs', state_costs)
    __object_setattr(self, 'chunked_as_full', chunked_as_full)
    __object_setattr(self, 'lag', lag)


def _45(self, dtype, has_swa):
    __object_setattr(self, 'dtype', dtype)
    __object_setattr(self, 'has_swa', has_swa)


def _46(self, dtype, page, windowed):
    __object_setattr(self, 'dtype', dtype)
    __object_setattr(self, 'page', page)
    __object_setattr(self, 'windowed', windowed)


def _47(self, dtype, version, assumptions, static):
    __object_setattr(self, 'dtype', dtype)
    __object_setattr(self, 'version', version)
    __object_setattr(self, 'assumptions', assumptions)
    __object_setattr(self, 'static', static)


def _48(self, engine, commands=_D, modules=_D, flags=_D, underscores=_D, images=_D, fp8_kv_flag=_D, parse_int=_D, speculation=_D, booleans=_D, floats=_D, env_prefixes=_D, reader=_D, environment=_D, wrappers=_D, tagged_images=_D, default_serve=_D, config_files=_D, config_keys=_D, merge=_D, model_reader=_D, short_pool=_D, hosts=_D, host_modules=_D, unread_host_modules=_D, default_image=_D, image_settings=_D):
    __object_setattr(self, 'engine', engine)
    __object_setattr(self, 'commands', commands)
    __object_setattr(self, 'modules', modules)
    __object_setattr(self, 'flags', flags)
    __object_setattr(self, 'underscores', underscores)
    __object_setattr(self, 'images', images)
    __object_setattr(self, 'fp8_kv_flag', fp8_kv_flag)
    __object_setattr(self, 'parse_int', parse_int)
    __object_setattr(self, 'speculation', speculation)
    __object_setattr(self, 'booleans', booleans)
    __object_setattr(self, 'floats', floats)
    __object_setattr(self, 'env_prefixes', env_prefixes)
    __object_setattr(self, 'reader', reader)
    __object_setattr(self, 'environment', environment)
    __object_setattr(self, 'wrappers', wrappers)
    __object_setattr(self, 'tagged_images', tagged_images)
    __object_setattr(self, 'default_serve', default_serve)
    __object_setattr(self, 'config_files', config_files)
    __object_setattr(self, 'config_keys', config_keys)
    __object_setattr(self, 'merge', merge)
    __object_setattr(self, 'model_reader', model_reader)
    __object_setattr(self, 'short_pool', short_pool)
    __object_setattr(self, 'hosts', hosts)
    __object_setattr(self, 'host_modules', host_modules)
    __object_setattr(self, 'unread_host_modules', unread_host_modules)
    __object_setattr(self, 'default_image', default_image)
    __object_setattr(self, 'image_settings', image_settings)


def _49(self, engine, engine_version, kv_dtype, block_size, device, find_max_batch, gpu_memory_utilization, memory_budget, with_weights, decode, repeats, gpu, workload):
    __object_setattr(self, 'engine', engine)
    __object_setattr(self, 'engine_version', engine_version)
    __object_setattr(self, 'kv_dtype', kv_dtype)
    __object_setattr(self, 'block_size', block_size)
    __object_setattr(self, 'device', device)
    __object_setattr(self, 'find_max_batch', find_max_batch)
    __object_setattr(self, 'gpu_memory_utilization', gpu_memory_utilization)
    __object_setattr(self, 'memory_budget', memory_budget)
    __object_setattr(self, 'with_weights', with_weights)
    __object_setattr(self, 'decode', decode)
    __object_setattr(self, 'repeats', repeats)
    __object_setattr(self, 'gpu', gpu)
    __object_setattr(self, 'workload', workload)


def _50(self, engine, engine_version, kv_dtype, block_size, groups, assumptions=_D, pool=_D):
    __object_setattr(self, 'engine', engine)
    __object_setattr(self, 'engine_version', engine_version)
    __object_setattr(self, 'kv_dtype', kv_dtype)
    __object_setattr(self, 'block_size', block_size)
    __object_setattr(self, 'groups', groups)
    __object_setattr(self, 'assumptions', assumptions)
    __object_setattr(self, 'pool', pool)


def _51(self, engine, format, settings, memory, derived=_D, num_gpu_blocks=_D, kv_cache_tokens=_D, max_concurrency=_D, concurrency_len=_D, counts=_D, ranks=_D, lines_read=_D, bytes_read=_D, cut=_D, complete=_D, notes=_D, lines=_D, detected=_D, impossible=_D, startups=_D, size=_D, per_rank=_D, per_device=_D):
    __object_setattr(self, 'engine', engine)
    __object_setattr(self, 'format', format)
    __object_setattr(self, 'settings', settings)
    __object_setattr(self, 'memory', memory)
    __object_setattr(self, 'derived', derived)
    __object_setattr(self, 'num_gpu_blocks', num_gpu_blocks)
    __object_setattr(self, 'kv_cache_tokens', kv_cache_tokens)
    __object_setattr(self, 'max_concurrency', max_concurrency)
    __object_setattr(self, 'concurrency_len', concurrency_len)
    __object_setattr(self, 'counts', __factory_counts() if counts is __MISSING else counts)
    __object_setattr(self, 'ranks', ranks)
    __object_setattr(self, 'lines_read', lines_read)
    __object_setattr(self, 'bytes_read', bytes_read)
    __object_setattr(self, 'cut', cut)
    __object_setattr(self, 'complete', complete)
    __object_setattr(self, 'notes', notes)
    __object_setattr(self, 'lines', __factory_lines() if lines is __MISSING else lines)
    __object_setattr(self, 'detected', detected)
    __object_setattr(self, 'impossible', impossible)
    __object_setattr(self, 'startups', startups)
    __object_setattr(self, 'size', size)
    __object_setattr(self, 'per_rank', per_rank)
    __object_setattr(self, 'per_device', per_device)


def _52(self, engine, title, markers, read, sources=_D, finish=_D, implied_version=_D, logged_settings=_D, carried=_D, profile_settings=_D, calibrate=_D, startups=_D):
    __object_setattr(self, 'engine', engine)
    __object_setattr(self, 'title', title)
    __object_setattr(self, 'markers', markers)
    __object_setattr(self, 'read', read)
    __object_setattr(self, 'sources', sources)
    __object_setattr(self, 'finish', finish)
    __object_setattr(self, 'implied_version', implied_version)
    __object_setattr(self, 'logged_settings', logged_settings)
    __object_setattr(self, 'carried', carried)
    __object_setattr(self, 'profile_settings', profile_settings)
    __object_setattr(self, 'calibrate', calibrate)
    __object_setattr(self, 'startups', startups)


def _53(self, engine_options=_D, settings=_D, sharing=_D, remarks=_D, max_kv_tokens=_D, beam_width=_D, parallel=_D):
    __object_setattr(self, 'engine_options', engine_options)
    __object_setattr(self, 'settings', settings)
    __object_setattr(self, 'sharing', sharing)
    __object_setattr(self, 'remarks', remarks)
    __object_setattr(self, 'max_kv_tokens', max_kv_tokens)
    __object_setattr(self, 'beam_width', beam_width)
    __object_setattr(self, 'parallel', parallel)


def _54(self, gpu, engine, engine_version, kv_dtype, tp, pp, dp, gpus, nodes, kv_cache_tokens, max_concurrency, kv_left_bytes, decode_step_seconds_min, output_tokens_per_second_max, ttft_seconds_min, usd_per_hour, usd_per_million_output_tokens, command, assumptions=_D, plan=_D, beside=_D):
    __object_setattr(self, 'gpu', gpu)
    __object_setattr(self, 'engine', engine)
    __object_setattr(self, 'engine_version', engine_version)
    __object_setattr(self, 'kv_dtype', kv_dtype)
    __object_setattr(self, 'tp', tp)
    __object_setattr(self, 'pp', pp)
    __object_setattr(self, 'dp', dp)
    __object_setattr(self, 'gpus', gpus)
    __object_setattr(self, 'nodes', nodes)
    __object_setattr(self, 'kv_cache_tokens', kv_cache_tokens)
    __object_setattr(self, 'max_concurrency', max_concurrency)
    __object_setattr(self, 'kv_left_bytes', kv_left_bytes)
    __object_setattr(self, 'decode_step_seconds_min', decode_step_seconds_min)
    __object_setattr(self, 'output_tokens_per_second_max', output_tokens_per_second_max)
    __object_setattr(self, 'ttft_seconds_min', ttft_seconds_min)
    __object_setattr(self, 'usd_per_hour', usd_per_hour)
    __object_setattr(self, 'usd_per_million_output_tokens', usd_per_million_output_tokens)
    __object_setattr(self, 'command', command)
    __object_setattr(self, 'assumptions', assumptions)
    __object_setattr(self, 'plan', plan)
    __object_setattr(self, 'beside', beside)


def _55(self, gpu, engine, kv_dtype, reason):
    __object_setattr(self, 'gpu', gpu)
    __object_setattr(self, 'engine', engine)
    __object_setattr(self, 'kv_dtype', kv_dtype)
    __object_setattr(self, 'reason', reason)


def _56(self, gpu, total_bytes, orders, fixes=_D):
    __object_setattr(self, 'gpu', gpu)
    __object_setattr(self, 'total_bytes', total_bytes)
    __object_setattr(self, 'orders', orders)
    __object_setattr(self, 'fixes', fixes)


def _57(self, gpu_mib, tp=_D, pp=_D, speculative=_D, mla=_D, model_type=_D, model_id=_D, chunked_prefill_size=_D, context_length=_D, enforce_eager=_D, cpu_offload=_D, amd=_D, multimodal=_D):
    __object_setattr(self, 'gpu_mib', gpu_mib)
    __object_setattr(self, 'tp', tp)
    __object_setattr(self, 'pp', pp)
    __object_setattr(self, 'speculative', speculative)
    __object_setattr(self, 'mla', mla)
    __object_setattr(self, 'model_type', model_type)
    __object_setattr(self, 'model_id', model_id)
    __object_setattr(self, 'chunked_prefill_size', chunked_prefill_size)
    __object_setattr(self, 'context_length', context_length)
    __object_setattr(self, 'enforce_eager', enforce_eager)
    __object_setattr(self, 'cpu_offload', cpu_offload)
    __object_setattr(self, 'amd', amd)
    __object_setattr(self, 'multimodal', multimodal)


def _58(self, held, once=_D, shared=_D, spans=_D):
    __object_setattr(self, 'held', held)
    __object_setattr(self, 'once', once)
    __object_setattr(self, 'shared', shared)
    __object_setattr(self, 'spans', spans)


def _59(self, id, source, model_type, num_layers, layer_kinds, params, weights_bytes, dtype, max_position_embeddings, mtp_layers=_D, mtp_weights_bytes=_D):
    __object_setattr(self, 'id', id)
    __object_setattr(self, 'source', source)
    __object_setattr(self, 'model_type', model_type)
    __object_setattr(self, 'num_layers', num_layers)
    __object_setattr(self, 'layer_kinds', layer_kinds)
    __object_setattr(self, 'params', params)
    __object_setattr(self, 'weights_bytes', weights_bytes)
    __object_setattr(self, 'dtype', dtype)
    __object_setattr(self, 'max_position_embeddings', max_position_embeddings)
    __object_setattr(self, 'mtp_layers', mtp_layers)
    __object_setattr(self, 'mtp_weights_bytes', mtp_weights_bytes)


def _60(self, index, kind, component, layer, attend, layout):
    __object_setattr(self, 'index', index)
    __object_setattr(self, 'kind', kind)
    __object_setattr(self, 'component', component)
    __object_setattr(self, 'layer', layer)
    __object_setattr(self, 'attend', attend)
    __object_setattr(self, 'layout', layout)


def _61(self, index, kind, tokens_held, bytes):
    __object_setattr(self, 'index', index)
    __object_setattr(self, 'kind', kind)
    __object_setattr(self, 'tokens_held', tokens_held)
    __object_setattr(self, 'bytes', bytes)


def _62(self, inner, heads, head_dim, state, groups, kernel):
    __object_setattr(self, 'inner', inner)
    __object_setattr(self, 'heads', heads)
    __object_setattr(self, 'head_dim', head_dim)
    __object_setattr(self, 'state', state)
    __object_setattr(self, 'groups', groups)
    __object_setattr(self, 'kernel', kernel)


def _63(self, inner, page):
    __object_setattr(self, 'inner', inner)
    __object_setattr(self, 'page', page)


def _64(self, item, unit, logged, step, text, derived, line, kvplan):
    __object_setattr(self, 'item', item)
    __object_setattr(self, 'unit', unit)
    __object_setattr(self, 'logged', logged)
    __object_setattr(self, 'step', step)
    __object_setattr(self, 'text', text)
    __object_setattr(self, 'derived', derived)
    __object_setattr(self, 'line', line)
    __object_setattr(self, 'kvplan', kvplan)


def _65(self, items, kept_bytes, peak_bytes, how):
    __object_setattr(self, 'items', items)
    __object_setattr(self, 'kept_bytes', kept_bytes)
    __object_setattr(self, 'peak_bytes', peak_bytes)
    __object_setattr(self, 'how', how)


def _66(self, keep, recent, keep_name=_D):
    __object_setattr(self, 'keep', keep)
    __object_setattr(self, 'recent', recent)
    __object_setattr(self, 'keep_name', keep_name)


def _67(self, kept, prompt_len=_D):
    __object_setattr(self, 'kept', kept)
    __object_setattr(self, 'prompt_len', prompt_len)


def _68(self, kind, disk_bytes, blocks, tokens, requests):
    __object_setattr(self, 'kind', kind)
    __object_setattr(self, 'disk_bytes', disk_bytes)
    __object_setattr(self, 'blocks', blocks)
    __object_setattr(self, 'tokens', tokens)
    __object_setattr(self, 'requests', requests)


def _69(self, kind, host_bytes, blocks, block_size, tokens, pinned_bytes, requests, request_bytes_per_gpu, link, restore_seconds, disk=_D, remarks=_D, held_bytes=_D, pinned_range=_D):
    __object_setattr(self, 'kind', kind)
    __object_setattr(self, 'host_bytes', host_bytes)
    __object_setattr(self, 'blocks', blocks)
    __object_setattr(self, 'block_size', block_size)
    __object_setattr(self, 'tokens', tokens)
    __object_setattr(self, 'pinned_bytes', pinned_bytes)
    __object_setattr(self, 'requests', requests)
    __object_setattr(self, 'request_bytes_per_gpu', request_bytes_per_gpu)
    __object_setattr(self, 'link', link)
    __object_setattr(self, 'restore_seconds', restore_seconds)
    __object_setattr(self, 'disk', disk)
    __object_setattr(self, 'remarks', remarks)
    __object_setattr(self, 'held_bytes', held_bytes)
    __object_setattr(self, 'pinned_range', pinned_range)


def _70(self, kind, span, block_size, page_bytes, layers, rule):
    __object_setattr(self, 'kind', kind)
    __object_setattr(self, 'span', span)
    __object_setattr(self, 'block_size', block_size)
    __object_setattr(self, 'page_bytes', page_bytes)
    __object_setattr(self, 'layers', layers)
    __object_setattr(self, 'rule', rule)


def _71(self, kind, title, caption, x_label, y_label, series, categories=_D, log_x=_D, reference=_D, vertical=_D, log_y=_D, y_floor=_D, data=_D, below=_D):
    __object_setattr(self, 'kind', kind)
    __object_setattr(self, 'title', title)
    __object_setattr(self, 'caption', caption)
    __object_setattr(self, 'x_label', x_label)
    __object_setattr(self, 'y_label', y_label)
    __object_setattr(self, 'series', series)
    __object_setattr(self, 'categories', categories)
    __object_setattr(self, 'log_x', log_x)
    __object_setattr(self, 'reference', reference)
    __object_setattr(self, 'vertical', vertical)
    __object_setattr(self, 'log_y', log_y)
    __object_setattr(self, 'y_floor', y_floor)
    __object_setattr(self, 'data', __factory_data() if data is __MISSING else data)
    __object_setattr(self, 'below', below)


def _72(self, kv_dtype, count, kind, tokens_held_formula, once_tokens, per_request_tokens, per_sequence_tokens, tokens, plain_tokens):
    __object_setattr(self, 'kv_dtype', kv_dtype)
    __object_setattr(self, 'count', count)
    __object_setattr(self, 'kind', kind)
    __object_setattr(self, 'tokens_held_formula', tokens_held_formula)
    __object_setattr(self, 'once_tokens', once_tokens)
    __object_setattr(self, 'per_request_tokens', per_request_tokens)
    __object_setattr(self, 'per_sequence_tokens', per_sequence_tokens)
    __object_setattr(self, 'tokens', tokens)
    __object_setattr(self, 'plain_tokens', plain_tokens)


def _73(self, kv_dtype, kv_dtype_resolved, batches, contexts, kv_bytes, bytes_per_token, admission_kv_bytes):
    __object_setattr(self, 'kv_dtype', kv_dtype)
    __object_setattr(self, 'kv_dtype_resolved', kv_dtype_resolved)
    __object_setattr(self, 'batches', batches)
    __object_setattr(self, 'contexts', contexts)
    __object_setattr(self, 'kv_bytes', kv_bytes)
    __object_setattr(self, 'bytes_per_token', bytes_per_token)
    __object_setattr(self, 'admission_kv_bytes', admission_kv_bytes)


def _74(self, kv_dtype, layers, count, kind, bytes_per_token, token_formula, tokens_held_formula, state_bytes, state_formula):
    __object_setattr(self, 'kv_dtype', kv_dtype)
    __object_setattr(self, 'layers', layers)
    __object_setattr(self, 'count', count)
    __object_setattr(self, 'kind', kind)
    __object_setattr(self, 'bytes_per_token', bytes_per_token)
    __object_setattr(self, 'token_formula', token_formula)
    __object_setattr(self, 'tokens_held_formula', tokens_held_formula)
    __object_setattr(self, 'state_bytes', state_bytes)
    __object_setattr(self, 'state_formula', state_formula)


def _75(self, kvplan_version, engine, engine_version, block_size, model, rows, formulas, assumptions=_D, sharing=_D, sharing_terms=_D, engine_options=_D, speculation=_D):
    __object_setattr(self, 'kvplan_version', kvplan_version)
    __object_setattr(self, 'engine', engine)
    __object_setattr(self, 'engine_version', engine_version)
    __object_setattr(self, 'block_size', block_size)
    __object_setattr(self, 'model', model)
    __object_setattr(self, 'rows', rows)
    __object_setattr(self, 'formulas', formulas)
    __object_setattr(self, 'assumptions', assumptions)
    __object_setattr(self, 'sharing', sharing)
    __object_setattr(self, 'sharing_terms', sharing_terms)
    __object_setattr(self, 'engine_options', __factory_engine_options() if engine_options is __MISSING else engine_options)
    __object_setattr(self, 'speculation', speculation)


def _76(self, kvplan_version, engine, engine_version, model_id, gpu_name, gpu_total_bytes, gpu_count, tp, pp, dp, kv_dtype, per_gpu, items, block_size, num_blocks, kv_cache_tokens, max_model_len, context, batch, max_concurrency, max_batch, max_context, fits, request_kv_bytes, max_model_len_fit, decode_step_seconds_min, decode_tokens_per_second_max, engine_defaults=_D, assumptions=_D, admission_note=_D, shared_prefix=_D, max_batch_plain=_D, n=_D, beam_width=_D, offload=_D, speculation=_D, mtp_layers=_D, mtp_weights_bytes=_D, misfit=_D, ep=_D, interval=_D, solved=_D, state_slots=_D, asked=_D):
    __object_setattr(self, 'kvplan_version', kvplan_version)
    __object_setattr(self, 'engine', engine)
    __object_setattr(self, 'engine_version', engine_version)
    __object_setattr(self, 'model_id', model_id)
    __object_setattr(self, 'gpu_name', gpu_name)
    __object_setattr(self, 'gpu_total_bytes', gpu_total_bytes)
    __object_setattr(self, 'gpu_count', gpu_count)
    __object_setattr(self, 'tp', tp)
    __object_setattr(self, 'pp', pp)
    __object_setattr(self, 'dp', dp)
    __object_setattr(self, 'kv_dtype', kv_dtype)
    __object_setattr(self, 'per_gpu', per_gpu)
    __object_setattr(self, 'items', items)
    __object_setattr(self, 'block_size', block_size)
    __object_setattr(self, 'num_blocks', num_blocks)
    __object_setattr(self, 'kv_cache_tokens', kv_cache_tokens)
    __object_setattr(self, 'max_model_len', max_model_len)
    __object_setattr(self, 'context', context)
    __object_setattr(self, 'batch', batch)
    __object_setattr(self, 'max_concurrency', max_concurrency)
    __object_setattr(self, 'max_batch', max_batch)
    __object_setattr(self, 'max_context', max_context)
    __object_setattr(self, 'fits', fits)
    __object_setattr(self, 'request_kv_bytes', request_kv_bytes)
    __object_setattr(self, 'max_model_len_fit', max_model_len_fit)
    __object_setattr(self, 'decode_step_seconds_min', decode_step_seconds_min)
    __object_setattr(self, 'decode_tokens_per_second_max', decode_tokens_per_second_max)
    __object_setattr(self, 'engine_defaults', __factory_engine_defaults() if engine_defaults is __MISSING else engine_defaults)
    __object_setattr(self, 'assumptions', assumptions)
    __object_setattr(self, 'admission_note', admission_note)
    __object_setattr(self, 'shared_prefix', shared_prefix)
    __object_setattr(self, 'max_batch_plain', max_batch_plain)
    __object_setattr(self, 'n', n)
    __object_setattr(self, 'beam_width', beam_width)
    __object_setattr(self, 'offload', offload)
    __object_setattr(self, 'speculation', speculation)
    __object_setattr(self, 'mtp_layers', mtp_layers)
    __object_setattr(self, 'mtp_weights_bytes', mtp_weights_bytes)
    __object_setattr(self, 'misfit', misfit)
    __object_setattr(self, 'ep', ep)
    __object_setattr(self, 'interval', interval)
    __object_setattr(self, 'solved', solved)
    __object_setattr(self, 'state_slots', state_slots)
    __object_setattr(self, 'asked', asked)


def _77(self, kvplan_version, model_id, context, concurrency, prompt_len, gpus_per_node, rows, refused, currency, assumptions=_D, beside=_D):
    __object_setattr(self, 'kvplan_version', kvplan_version)
    __object_setattr(self, 'model_id', model_id)
    __object_setattr(self, 'context', context)
    __object_setattr(self, 'concurrency', concurrency)
    __object_setattr(self, 'prompt_len', prompt_len)
    __object_setattr(self, 'gpus_per_node', gpus_per_node)
    __object_setattr(self, 'rows', rows)
    __object_setattr(self, 'refused', refused)
    __object_setattr(self, 'currency', currency)
    __object_setattr(self, 'assumptions', assumptions)
    __object_setattr(self, 'beside', beside)


def _78(self, kvplan_version, model_id, device, device_name, device_total_bytes, engine, engine_version, block_size, batch, context, kv_dtype, predicted_bytes, measured_storage_bytes, allocated_bytes, reserved_bytes, driver_bytes, peak_allocated_bytes, allocator_bytes, segment_bytes, buffers, num_blocks, components, released, max_batch=_D, decode=_D, notes=_D, sharing=_D, allocator_rounded_bytes=_D, unsplit_blocks=_D):
    __object_setattr(self, 'kvplan_version', kvplan_version)
    __object_setattr(self, 'model_id', model_id)
    __object_setattr(self, 'device', device)
    __object_setattr(self, 'device_name', device_name)
    __object_setattr(self, 'device_total_bytes', device_total_bytes)
    __object_setattr(self, 'engine', engine)
    __object_setattr(self, 'engine_version', engine_version)
    __object_setattr(self, 'block_size', block_size)
    __object_setattr(self, 'batch', batch)
    __object_setattr(self, 'context', context)
    __object_setattr(self, 'kv_dtype', kv_dtype)
    __object_setattr(self, 'predicted_bytes', predicted_bytes)
    __object_setattr(self, 'measured_storage_bytes', measured_storage_bytes)
    __object_setattr(self, 'allocated_bytes', allocated_bytes)
    __object_setattr(self, 'reserved_bytes', reserved_bytes)
    __object_setattr(self, 'driver_bytes', driver_bytes)
    __object_setattr(self, 'peak_allocated_bytes', peak_allocated_bytes)
    __object_setattr(self, 'allocator_bytes', allocator_bytes)
    __object_setattr(self, 'segment_bytes', segment_bytes)
    __object_setattr(self, 'buffers', buffers)
    __object_setattr(self, 'num_blocks', num_blocks)
    __object_setattr(self, 'components', components)
    __object_setattr(self, 'released', released)
    __object_setattr(self, 'max_batch', max_batch)
    __object_setattr(self, 'decode', decode)
    __object_setattr(self, 'notes', notes)
    __object_setattr(self, 'sharing', sharing)
    __object_setattr(self, 'allocator_rounded_bytes', allocator_rounded_bytes)
    __object_setattr(self, 'unsplit_blocks', unsplit_blocks)


def _79(self, kvplan_version, model_id, engine, engine_version, kv_dtype, block_size, batch, context, tp, pp, backend, launcher, ranks, notes=_D, sharing=_D):
    __object_setattr(self, 'kvplan_version', kvplan_version)
    __object_setattr(self, 'model_id', model_id)
    __object_setattr(self, 'engine', engine)
    __object_setattr(self, 'engine_version', engine_version)
    __object_setattr(self, 'kv_dtype', kv_dtype)
    __object_setattr(self, 'block_size', block_size)
    __object_setattr(self, 'batch', batch)
    __object_setattr(self, 'context', context)
    __object_setattr(self, 'tp', tp)
    __object_setattr(self, 'pp', pp)
    __object_setattr(self, 'backend', backend)
    __object_setattr(self, 'launcher', launcher)
    __object_setattr(self, 'ranks', ranks)
    __object_setattr(self, 'notes', notes)
    __object_setattr(self, 'sharing', sharing)


def _80(self, label, x, y, band=_D, band_label=_D, none=_D):
    __object_setattr(self, 'label', label)
    __object_setattr(self, 'x', x)
    __object_setattr(self, 'y', y)
    __object_setattr(self, 'band', band)
    __object_setattr(self, 'band_label', band_label)
    __object_setattr(self, 'none', none)


def _81(self, layer, first_layer, token, tokens=_D, state=_D, block_size=_D, cache_kind=_D, padding=_D):
    __object_setattr(self, 'layer', layer)
    __object_setattr(self, 'first_layer', first_layer)
    __object_setattr(self, 'token', token)
    __object_setattr(self, 'tokens', tokens)
    __object_setattr(self, 'state', state)
    __object_setattr(self, 'block_size', block_size)
    __object_setattr(self, 'cache_kind', cache_kind)
    __object_setattr(self, 'padding', padding)


def _82(self, layer, first_layer, token, tokens=_D, state=_D, block_size=_D, cache_kind=_D, padding=_D, keys=_D, values=_D, k_shape=_D, v_shape=_D, elem_bytes=_D):
    __object_setattr(self, 'layer', layer)
    __object_setattr(self, 'first_layer', first_layer)
    __object_setattr(self, 'token', token)
    __object_setattr(self, 'tokens', tokens)
    __object_setattr(self, 'state', state)
    __object_setattr(self, 'block_size', block_size)
    __object_setattr(self, 'cache_kind', cache_kind)
    __object_setattr(self, 'padding', padding)
    __object_setattr(self, 'keys', keys)
    __object_setattr(self, 'values', values)
    __object_setattr(self, 'k_shape', k_shape)
    __object_setattr(self, 'v_shape', v_shape)
    __object_setattr(self, 'elem_bytes', elem_bytes)


def _83(self, layer, role, dtype, shape, offset=_D, pitch=_D):
    __object_setattr(self, 'layer', layer)
    __object_setattr(self, 'role', role)
    __object_setattr(self, 'dtype', dtype)
    __object_setattr(self, 'shape', shape)
    __object_setattr(self, 'offset', offset)
    __object_setattr(self, 'pitch', pitch)


def _84(self, layers, first_block, requests, samples, once, per_request, per_sequence, default_block_size=_D):
    __object_setattr(self, 'layers', layers)
    __object_setattr(self, 'first_block', first_block)
    __object_setattr(self, 'requests', requests)
    __object_setattr(self, 'samples', samples)
    __object_setattr(self, 'once', once)
    __object_setattr(self, 'per_request', per_request)
    __object_setattr(self, 'per_sequence', per_sequence)
    __object_setattr(self, 'default_block_size', default_block_size)


def _85(self, layers, hidden, mlp=_D, patch_values=_D, patches_per_item=_D, tokens_per_item=_D, embeds_per_item=_D, masked_attention=_D, transformers_tower=_D, where=_D, gated_mlp=_D, output_widths=_D, sized_by=_D):
    __object_setattr(self, 'layers', layers)
    __object_setattr(self, 'hidden', hidden)
    __object_setattr(self, 'mlp', mlp)
    __object_setattr(self, 'patch_values', patch_values)
    __object_setattr(self, 'patches_per_item', patches_per_item)
    __object_setattr(self, 'tokens_per_item', tokens_per_item)
    __object_setattr(self, 'embeds_per_item', embeds_per_item)
    __object_setattr(self, 'masked_attention', masked_attention)
    __object_setattr(self, 'transformers_tower', transformers_tower)
    __object_setattr(self, 'where', where)
    __object_setattr(self, 'gated_mlp', gated_mlp)
    __object_setattr(self, 'output_widths', output_widths)
    __object_setattr(self, 'sized_by', sized_by)


def _86(self, layers, sequences, blocks, referenced_blocks, once, per_request, per_sequence, referenced_bytes):
    __object_setattr(self, 'layers', layers)
    __object_setattr(self, 'sequences', sequences)
    __object_setattr(self, 'blocks', blocks)
    __object_setattr(self, 'referenced_blocks', referenced_blocks)
    __object_setattr(self, 'once', once)
    __object_setattr(self, 'per_request', per_request)
    __object_setattr(self, 'per_sequence', per_sequence)
    __object_setattr(self, 'referenced_bytes', referenced_bytes)


def _87(self, less):
    __object_setattr(self, 'less', less)


def _88(self, linear, other, how):
    __object_setattr(self, 'linear', linear)
    __object_setattr(self, 'other', other)
    __object_setattr(self, 'how', how)


def _89(self, low, high, basis, thin=_D):
    __object_setattr(self, 'low', low)
    __object_setattr(self, 'high', high)
    __object_setattr(self, 'basis', basis)
    __object_setattr(self, 'thin', thin)


def _90(self, max_model_len, context, batch, limit=_D, shared_prefix=_D, proposer=_D, n=_D, beam_width=_D, prompt_len=_D, gpu_name=_D, gpu_vendor=_D, speculative=_D, dp=_D):
    __object_setattr(self, 'max_model_len', max_model_len)
    __object_setattr(self, 'context', context)
    __object_setattr(self, 'batch', batch)
    __object_setattr(self, 'limit', limit)
    __object_setattr(self, 'shared_prefix', shared_prefix)
    __object_setattr(self, 'proposer', proposer)
    __object_setattr(self, 'n', n)
    __object_setattr(self, 'beam_width', beam_width)
    __object_setattr(self, 'prompt_len', prompt_len)
    __object_setattr(self, 'gpu_name', gpu_name)
    __object_setattr(self, 'gpu_vendor', gpu_vendor)
    __object_setattr(self, 'speculative', speculative)
    __object_setattr(self, 'dp', dp)


def _91(self, max_num_batched_tokens, max_num_seqs, why):
    __object_setattr(self, 'max_num_batched_tokens', max_num_batched_tokens)
    __object_setattr(self, 'max_num_seqs', max_num_seqs)
    __object_setattr(self, 'why', why)


def _92(self, method, max_batch=_D):
    __object_setattr(self, 'method', method)
    __object_setattr(self, 'max_batch', max_batch)


def _93(self, method=_D, bits=_D, four_bit_bytes=_D, name=_D):
    __object_setattr(self, 'method', method)
    __object_setattr(self, 'bits', bits)
    __object_setattr(self, 'four_bit_bytes', four_bit_bytes)
    __object_setattr(self, 'name', name)


def _94(self, model, context, concurrency=_D):
    __object_setattr(self, 'model', model)
    __object_setattr(self, 'context', context)
    __object_setattr(self, 'concurrency', concurrency)


def _95(self, model, gpu, engine_version, plan, assumptions, biggest, biggest_item=_D):
    __object_setattr(self, 'model', model)
    __object_setattr(self, 'gpu', gpu)
    __object_setattr(self, 'engine_version', engine_version)
    __object_setattr(self, 'plan', plan)
    __object_setattr(self, 'assumptions', assumptions)
    __object_setattr(self, 'biggest', biggest)
    __object_setattr(self, 'biggest_item', biggest_item)


def _96(self, model, setting, flag, fraction, beside_fraction, fits, reason, share=_D):
    __object_setattr(self, 'model', model)
    __object_setattr(self, 'setting', setting)
    __object_setattr(self, 'flag', flag)
    __object_setattr(self, 'fraction', fraction)
    __object_setattr(self, 'beside_fraction', beside_fraction)
    __object_setattr(self, 'fits', fits)
    __object_setattr(self, 'reason', reason)
    __object_setattr(self, 'share', share)


def _97(self, model, tp=_D, pp=_D, dp=_D, max_model_len=_D, kv_dtype=_D, expert_parallel=_D):
    __object_setattr(self, 'model', model)
    __object_setattr(self, 'tp', tp)
    __object_setattr(self, 'pp', pp)
    __object_setattr(self, 'dp', dp)
    __object_setattr(self, 'max_model_len', max_model_len)
    __object_setattr(self, 'kv_dtype', kv_dtype)
    __object_setattr(self, 'expert_parallel', expert_parallel)


def _98(self, model=_D, engine_version=_D, gpu_name=_D, tp=_D, pp=_D, dtype=_D, kv_dtype=_D, max_model_len=_D, gpu_memory_utilization=_D, mem_fraction_static=_D, max_num_batched_tokens=_D, max_num_seqs=_D, block_size=_D, enforce_eager=_D, vllm_sampler=_D):
    __object_setattr(self, 'model', model)
    __object_setattr(self, 'engine_version', engine_version)
    __object_setattr(self, 'gpu_name', gpu_name)
    __object_setattr(self, 'tp', tp)
    __object_setattr(self, 'pp', pp)
    __object_setattr(self, 'dtype', dtype)
    __object_setattr(self, 'kv_dtype', kv_dtype)
    __object_setattr(self, 'max_model_len', max_model_len)
    __object_setattr(self, 'gpu_memory_utilization', gpu_memory_utilization)
    __object_setattr(self, 'mem_fraction_static', mem_fraction_static)
    __object_setattr(self, 'max_num_batched_tokens', max_num_batched_tokens)
    __object_setattr(self, 'max_num_seqs', max_num_seqs)
    __object_setattr(self, 'block_size', block_size)
    __object_setattr(self, 'enforce_eager', enforce_eager)
    __object_setattr(self, 'vllm_sampler', vllm_sampler)


def _99(self, model_id, device, transformers_version, attn_implementation, batch, tokens, dtype, weights_bytes, cache_bytes, cache_storage_bytes, predicted_cache_bytes, peak_bytes, activation_bytes, predicted_activation_bytes, predicted_formula, skipped=_D, notes=_D, blas_workspace_bytes=_D):
    __object_setattr(self, 'model_id', model_id)
    __object_setattr(self, 'device', device)
    __object_setattr(self, 'transformers_version', transformers_version)
    __object_setattr(self, 'attn_implementation', attn_implementation)
    __object_setattr(self, 'batch', batch)
    __object_setattr(self, 'tokens', tokens)
    __object_setattr(self, 'dtype', dtype)
    __object_setattr(self, 'weights_bytes', weights_bytes)
    __object_setattr(self, 'cache_bytes', cache_bytes)
    __object_setattr(self, 'cache_storage_bytes', cache_storage_bytes)
    __object_setattr(self, 'predicted_cache_bytes', predicted_cache_bytes)
    __object_setattr(self, 'peak_bytes', peak_bytes)
    __object_setattr(self, 'activation_bytes', activation_bytes)
    __object_setattr(self, 'predicted_activation_bytes', predicted_activation_bytes)
    __object_setattr(self, 'predicted_formula', predicted_formula)
    __object_setattr(self, 'skipped', skipped)
    __object_setattr(self, 'notes', notes)
    __object_setattr(self, 'blas_workspace_bytes', blas_workspace_bytes)


def _100(self, model_id, engine, engine_version, kv_dtype, block_size, batch, context, predicted_bytes, buffers, components, layers, num_blocks=_D, group_size=_D, padding_layers=_D, notes=_D, block_tables=_D):
    __object_setattr(self, 'model_id', model_id)
    __object_setattr(self, 'engine', engine)
    __object_setattr(self, 'engine_version', engine_version)
    __object_setattr(self, 'kv_dtype', kv_dtype)
    __object_setattr(self, 'block_size', block_size)
    __object_setattr(self, 'batch', batch)
    __object_setattr(self, 'context', context)
    __object_setattr(self, 'predicted_bytes', predicted_bytes)
    __object_setattr(self, 'buffers', buffers)
    __object_setattr(self, 'components', components)
    __object_setattr(self, 'layers', layers)
    __object_setattr(self, 'num_blocks', num_blocks)
    __object_setattr(self, 'group_size', group_size)
    __object_setattr(self, 'padding_layers', padding_layers)
    __object_setattr(self, 'notes', notes)
    __object_setattr(self, 'block_tables', block_tables)


def _101(self, name, aliases, vendor, memory_bytes, bandwidth, tflops, sources=_D, marketing_memory_gb=_D, memory_precision=_D, estimate=_D, notes=_D, origin=_D, unified_memory=_D):
    __object_setattr(self, 'name', name)
    __object_setattr(self, 'aliases', aliases)
    __object_setattr(self, 'vendor', vendor)
    __object_setattr(self, 'memory_bytes', memory_bytes)
    __object_setattr(self, 'bandwidth', bandwidth)
    __object_setattr(self, 'tflops', tflops)
    __object_setattr(self, 'sources', __factory_sources() if sources is __MISSING else sources)
    __object_setattr(self, 'marketing_memory_gb', marketing_memory_gb)
    __object_setattr(self, 'memory_precision', memory_precision)
    __object_setattr(self, 'estimate', estimate)
    __object_setattr(self, 'notes', notes)
    __object_setattr(self, 'origin', origin)
    __object_setattr(self, 'unified_memory', unified_memory)


def _102(self, name, attention=_D, mlp=_D, rope_bytes_per_token=_D, qk_norm=_D, norms=_D, router_weight_bytes=_D, router_logit_bytes=_D, expert_bias=_D, modeled=_D):
    __object_setattr(self, 'name', name)
    __object_setattr(self, 'attention', attention)
    __object_setattr(self, 'mlp', mlp)
    __object_setattr(self, 'rope_bytes_per_token', rope_bytes_per_token)
    __object_setattr(self, 'qk_norm', qk_norm)
    __object_setattr(self, 'norms', norms)
    __object_setattr(self, 'router_weight_bytes', router_weight_bytes)
    __object_setattr(self, 'router_logit_bytes', router_logit_bytes)
    __object_setattr(self, 'expert_bias', expert_bias)
    __object_setattr(self, 'modeled', modeled)


def _103(self, name, block_elems, block_bytes, scale_bytes_per_vector=_D, description=_D):
    __object_setattr(self, 'name', name)
    __object_setattr(self, 'block_elems', block_elems)
    __object_setattr(self, 'block_bytes', block_bytes)
    __object_setattr(self, 'scale_bytes_per_vector', scale_bytes_per_vector)
    __object_setattr(self, 'description', description)


def _104(self, name, bytes, tag, note=_D):
    __object_setattr(self, 'name', name)
    __object_setattr(self, 'bytes', bytes)
    __object_setattr(self, 'tag', tag)
    __object_setattr(self, 'note', note)


def _105(self, name, bytes_per_s, source, aliases=_D):
    __object_setattr(self, 'name', name)
    __object_setattr(self, 'bytes_per_s', bytes_per_s)
    __object_setattr(self, 'source', source)
    __object_setattr(self, 'aliases', aliases)


def _106(self, name, dtype, shape, views):
    __object_setattr(self, 'name', name)
    __object_setattr(self, 'dtype', dtype)
    __object_setattr(self, 'shape', shape)
    __object_setattr(self, 'views', views)


def _107(self, name, engine, settings, plan_at):
    __object_setattr(self, 'name', name)
    __object_setattr(self, 'engine', engine)
    __object_setattr(self, 'settings', settings)
    __object_setattr(self, 'plan_at', plan_at)


def _108(self, name, engine, used_before_bytes, starts, reason, takes_bytes, kv_cache_bytes, kv_cache_tokens, max_concurrency, fits=_D, capped=_D, notes=_D):
    __object_setattr(self, 'name', name)
    __object_setattr(self, 'engine', engine)
    __object_setattr(self, 'used_before_bytes', used_before_bytes)
    __object_setattr(self, 'starts', starts)
    __object_setattr(self, 'reason', reason)
    __object_setattr(self, 'takes_bytes', takes_bytes)
    __object_setattr(self, 'kv_cache_bytes', kv_cache_bytes)
    __object_setattr(self, 'kv_cache_tokens', kv_cache_tokens)
    __object_setattr(self, 'max_concurrency', max_concurrency)
    __object_setattr(self, 'fits', fits)
    __object_setattr(self, 'capped', capped)
    __object_setattr(self, 'notes', notes)


def _109(self, name, flags, help, target, field=_D, convert=_D, switch=_D, estimate=_D, file_key=_D, serve=_D, refusal=_D, combined=_D):
    __object_setattr(self, 'name', name)
    __object_setattr(self, 'flags', flags)
    __object_setattr(self, 'help', help)
    __object_setattr(self, 'target', target)
    __object_setattr(self, 'field', field)
    __object_setattr(self, 'convert', convert)
    __object_setattr(self, 'switch', switch)
    __object_setattr(self, 'estimate', estimate)
    __object_setattr(self, 'file_key', file_key)
    __object_setattr(self, 'serve', serve)
    __object_setattr(self, 'refusal', refusal)
    __object_setattr(self, 'combined', combined)


def _110(self, name, kind, layers, predicted_bytes, formula):
    __object_setattr(self, 'name', name)
    __object_setattr(self, 'kind', kind)
    __object_setattr(self, 'layers', layers)
    __object_setattr(self, 'predicted_bytes', predicted_bytes)
    __object_setattr(self, 'formula', formula)


def _111(self, name, kind, layers, predicted_bytes, measured_bytes):
    __object_setattr(self, 'name', name)
    __object_setattr(self, 'kind', kind)
    __object_setattr(self, 'layers', layers)
    __object_setattr(self, 'predicted_bytes', predicted_bytes)
    __object_setattr(self, 'measured_bytes', measured_bytes)


def _112(self, name, layers, params=_D, defaults=_D, mha=_D, tied_by_default=_D, own_towers=_D, known=_D, mtp=_D):
    __object_setattr(self, 'name', name)
    __object_setattr(self, 'layers', layers)
    __object_setattr(self, 'params', params)
    __object_setattr(self, 'defaults', __factory_defaults() if defaults is __MISSING else defaults)
    __object_setattr(self, 'mha', mha)
    __object_setattr(self, 'tied_by_default', tied_by_default)
    __object_setattr(self, 'own_towers', own_towers)
    __object_setattr(self, 'known', known)
    __object_setattr(self, 'mtp', mtp)


def _113(self, name=_D):
    __object_setattr(self, 'name', name)


def _114(self, name=_D, prebuilt_engine=_D):
    __object_setattr(self, 'name', name)
    __object_setattr(self, 'prebuilt_engine', prebuilt_engine)


def _115(self, name=_D, title=_D, default_version=_D, newest_rules=_D, extra_options=_D):
    __object_setattr(self, 'name', name)
    __object_setattr(self, 'title', title)
    __object_setattr(self, 'default_version', default_version)
    __object_setattr(self, 'newest_rules', newest_rules)
    __object_setattr(self, 'extra_options', extra_options)


def _116(self, name=_D, title=_D, default_version=_D, newest_rules=_D, memory_fraction=_D, extra_options=_D):
    __object_setattr(self, 'name', name)
    __object_setattr(self, 'title', title)
    __object_setattr(self, 'default_version', default_version)
    __object_setattr(self, 'newest_rules', newest_rules)
    __object_setattr(self, 'memory_fraction', memory_fraction)
    __object_setattr(self, 'extra_options', extra_options)


def _117(self, name=_D, title=_D, default_version=_D, newest_rules=_D, memory_fraction=_D, extra_options=_D, dp_shares_experts=_D):
    __object_setattr(self, 'name', name)
    __object_setattr(self, 'title', title)
    __object_setattr(self, 'default_version', default_version)
    __object_setattr(self, 'newest_rules', newest_rules)
    __object_setattr(self, 'memory_fraction', memory_fraction)
    __object_setattr(self, 'extra_options', extra_options)
    __object_setattr(self, 'dp_shares_experts', dp_shares_experts)


def _118(self, name=_D, title=_D, default_version=_D, newest_rules=_D, memory_fraction=_D, vendors=_D, extra_options=_D, unfit=_D):
    __object_setattr(self, 'name', name)
    __object_setattr(self, 'title', title)
    __object_setattr(self, 'default_version', default_version)
    __object_setattr(self, 'newest_rules', newest_rules)
    __object_setattr(self, 'memory_fraction', memory_fraction)
    __object_setattr(self, 'vendors', vendors)
    __object_setattr(self, 'extra_options', extra_options)
    __object_setattr(self, 'unfit', unfit)


def _119(self, name=_D, title=_D, default_version=_D, newest_rules=_D, static=_D, library=_D, extra_options=_D):
    __object_setattr(self, 'name', name)
    __object_setattr(self, 'title', title)
    __object_setattr(self, 'default_version', default_version)
    __object_setattr(self, 'newest_rules', newest_rules)
    __object_setattr(self, 'static', static)
    __object_setattr(self, 'library', library)
    __object_setattr(self, 'extra_options', extra_options)


def _120(self, nbits, axis, group_size):
    __object_setattr(self, 'nbits', nbits)
    __object_setattr(self, 'axis', axis)
    __object_setattr(self, 'group_size', group_size)


def _121(self, non_torch_tp1=_D, non_torch_tp=_D, non_torch_pp=_D, non_torch_all_tp1=_D, non_torch_all_tp=_D, non_torch_all_pp=_D, non_torch_v06=_D, non_torch_v0_tp1=_D, non_torch_v0_tp=_D):
    __object_setattr(self, 'non_torch_tp1', non_torch_tp1)
    __object_setattr(self, 'non_torch_tp', non_torch_tp)
    __object_setattr(self, 'non_torch_pp', non_torch_pp)
    __object_setattr(self, 'non_torch_all_tp1', non_torch_all_tp1)
    __object_setattr(self, 'non_torch_all_tp', non_torch_all_tp)
    __object_setattr(self, 'non_torch_all_pp', non_torch_all_pp)
    __object_setattr(self, 'non_torch_v06', non_torch_v06)
    __object_setattr(self, 'non_torch_v0_tp1', non_torch_v0_tp1)
    __object_setattr(self, 'non_torch_v0_tp', non_torch_v0_tp)


def _122(self, num_blocks, kv_cache_tokens, max_concurrency, blocks_per_request, request_bytes):
    __object_setattr(self, 'num_blocks', num_blocks)
    __object_setattr(self, 'kv_cache_tokens', kv_cache_tokens)
    __object_setattr(self, 'max_concurrency', max_concurrency)
    __object_setattr(self, 'blocks_per_request', blocks_per_request)
    __object_setattr(self, 'request_bytes', request_bytes)


def _123(self, number, rank, label, text):
    __object_setattr(self, 'number', number)
    __object_setattr(self, 'rank', rank)
    __object_setattr(self, 'label', label)
    __object_setattr(self, 'text', text)


def _124(self, once, per_request, per_sequence, samples):
    __object_setattr(self, 'once', once)
    __object_setattr(self, 'per_request', per_request)
    __object_setattr(self, 'per_sequence', per_sequence)
    __object_setattr(self, 'samples', samples)


def _125(self, pad):
    __object_setattr(self, 'pad', pad)


def _126(self, per_gpu_hour, currency=_D, source=_D):
    __object_setattr(self, 'per_gpu_hour', per_gpu_hour)
    __object_setattr(self, 'currency', currency)
    __object_setattr(self, 'source', source)


def _127(self, per_request, slots, state_bytes, token_bytes, max_running_requests, rule):
    __object_setattr(self, 'per_request', per_request)
    __object_setattr(self, 'slots', slots)
    __object_setattr(self, 'state_bytes', state_bytes)
    __object_setattr(self, 'token_bytes', token_bytes)
    __object_setattr(self, 'max_running_requests', max_running_requests)
    __object_setattr(self, 'rule', rule)


def _128(self, predicted, measured, budget_bytes, probes, from_estimate=_D):
    __object_setattr(self, 'predicted', predicted)
    __object_setattr(self, 'measured', measured)
    __object_setattr(self, 'budget_bytes', budget_bytes)
    __object_setattr(self, 'probes', probes)
    __object_setattr(self, 'from_estimate', from_estimate)


def _129(self, prompt_len, output_len, sequences, kv_bytes_plain):
    __object_setattr(self, 'prompt_len', prompt_len)
    __object_setattr(self, 'output_len', output_len)
    __object_setattr(self, 'sequences', sequences)
    __object_setattr(self, 'kv_bytes_plain', kv_bytes_plain)


def _130(self, prompt_len, output_len, shared_prefix, n, beam_width, sequences, kv_bytes_plain, referenced_bytes, block_tables=_D, speculative_method=_D, num_speculative_tokens=_D, extra_slots=_D, draft=_D):
    __object_setattr(self, 'prompt_len', prompt_len)
    __object_setattr(self, 'output_len', output_len)
    __object_setattr(self, 'shared_prefix', shared_prefix)
    __object_setattr(self, 'n', n)
    __object_setattr(self, 'beam_width', beam_width)
    __object_setattr(self, 'sequences', sequences)
    __object_setattr(self, 'kv_bytes_plain', kv_bytes_plain)
    __object_setattr(self, 'referenced_bytes', referenced_bytes)
    __object_setattr(self, 'block_tables', block_tables)
    __object_setattr(self, 'speculative_method', speculative_method)
    __object_setattr(self, 'num_speculative_tokens', num_speculative_tokens)
    __object_setattr(self, 'extra_slots', extra_slots)
    __object_setattr(self, 'draft', draft)


def _131(self, qkv_bias=_D, o_bias=_D, qkv_bias_field=_D, qk_norm=_D, norms=_D, moe=_D, shared_expert_gate=_D, mtp=_D, note=_D):
    __object_setattr(self, 'qkv_bias', qkv_bias)
    __object_setattr(self, 'o_bias', o_bias)
    __object_setattr(self, 'qkv_bias_field', qkv_bias_field)
    __object_setattr(self, 'qk_norm', qk_norm)
    __object_setattr(self, 'norms', norms)
    __object_setattr(self, 'moe', moe)
    __object_setattr(self, 'shared_expert_gate', shared_expert_gate)
    __object_setattr(self, 'mtp', mtp)
    __object_setattr(self, 'note', note)


def _132(self, quant, rule, version, elem_bytes):
    __object_setattr(self, 'quant', quant)
    __object_setattr(self, 'rule', rule)
    __object_setattr(self, 'version', version)
    __object_setattr(self, 'elem_bytes', elem_bytes)


def _133(self, rank, tp_rank, pp_rank, first_layer, num_layers, plan, work=_D):
    __object_setattr(self, 'rank', rank)
    __object_setattr(self, 'tp_rank', tp_rank)
    __object_setattr(self, 'pp_rank', pp_rank)
    __object_setattr(self, 'first_layer', first_layer)
    __object_setattr(self, 'num_layers', num_layers)
    __object_setattr(self, 'plan', plan)
    __object_setattr(self, 'work', work)


def _134(self, rank, tp_rank, pp_rank, local_rank, host, device, device_name, device_total_bytes, first_layer, num_layers, predicted_bytes, measured_storage_bytes, allocated_bytes, reserved_bytes, driver_bytes, peak_allocated_bytes, buffers, num_blocks, components, released, error=_D, referenced_bytes=_D):
    __object_setattr(self, 'rank', rank)
    __object_setattr(self, 'tp_rank', tp_rank)
    __object_setattr(self, 'pp_rank', pp_rank)
    __object_setattr(self, 'local_rank', local_rank)
    __object_setattr(self, 'host', host)
    __object_setattr(self, 'device', device)
    __object_setattr(self, 'device_name', device_name)
    __object_setattr(self, 'device_total_bytes', device_total_bytes)
    __object_setattr(self, 'first_layer', first_layer)
    __object_setattr(self, 'num_layers', num_layers)
    __object_setattr(self, 'predicted_bytes', predicted_bytes)
    __object_setattr(self, 'measured_storage_bytes', measured_storage_bytes)
    __object_setattr(self, 'allocated_bytes', allocated_bytes)
    __object_setattr(self, 'reserved_bytes', reserved_bytes)
    __object_setattr(self, 'driver_bytes', driver_bytes)
    __object_setattr(self, 'peak_allocated_bytes', peak_allocated_bytes)
    __object_setattr(self, 'buffers', buffers)
    __object_setattr(self, 'num_blocks', num_blocks)
    __object_setattr(self, 'components', components)
    __object_setattr(self, 'released', released)
    __object_setattr(self, 'error', error)
    __object_setattr(self, 'referenced_bytes', referenced_bytes)


def _135(self, rank, world_size, local_rank):
    __object_setattr(self, 'rank', rank)
    __object_setattr(self, 'world_size', world_size)
    __object_setattr(self, 'local_rank', local_rank)


def _136(self, ratio):
    __object_setattr(self, 'ratio', ratio)


def _137(self, ratio, layer, layers, window=_D, beta=_D):
    __object_setattr(self, 'ratio', ratio)
    __object_setattr(self, 'layer', layer)
    __object_setattr(self, 'layers', layers)
    __object_setattr(self, 'window', window)
    __object_setattr(self, 'beta', beta)


def _138(self, replan, context=_D, concurrency=_D):
    __object_setattr(self, 'replan', replan)
    __object_setattr(self, 'context', context)
    __object_setattr(self, 'concurrency', concurrency)


def _139(self, repo, revision, endpoint, cache, offline, fallback, tries, timeout_s):
    __object_setattr(self, 'repo', repo)
    __object_setattr(self, 'revision', revision)
    __object_setattr(self, 'endpoint', endpoint)
    __object_setattr(self, 'cache', cache)
    __object_setattr(self, 'offline', offline)
    __object_setattr(self, 'fallback', fallback)
    __object_setattr(self, 'tries', tries)
    __object_setattr(self, 'timeout_s', timeout_s)


def _140(self, residual_length, prompt_len=_D):
    __object_setattr(self, 'residual_length', residual_length)
    __object_setattr(self, 'prompt_len', prompt_len)


def _141(self, seconds, bound_seconds, peak_workspace_bytes, read_bytes, repeats, gpu, steps=_D):
    __object_setattr(self, 'seconds', seconds)
    __object_setattr(self, 'bound_seconds', bound_seconds)
    __object_setattr(self, 'peak_workspace_bytes', peak_workspace_bytes)
    __object_setattr(self, 'read_bytes', read_bytes)
    __object_setattr(self, 'repeats', repeats)
    __object_setattr(self, 'gpu', gpu)
    __object_setattr(self, 'steps', steps)


def _142(self, seconds, repeats, read_bytes, peak_workspace_bytes, layers):
    __object_setattr(self, 'seconds', seconds)
    __object_setattr(self, 'repeats', repeats)
    __object_setattr(self, 'read_bytes', read_bytes)
    __object_setattr(self, 'peak_workspace_bytes', peak_workspace_bytes)
    __object_setattr(self, 'layers', layers)


def _143(self, setting, engines, titles, own_names=_D):
    __object_setattr(self, 'setting', setting)
    __object_setattr(self, 'engines', engines)
    __object_setattr(self, 'titles', titles)
    __object_setattr(self, 'own_names', own_names)


def _144(self, setting, value, flag, kv_cache_tokens, max_concurrency, why, command=_D):
    __object_setattr(self, 'setting', setting)
    __object_setattr(self, 'value', value)
    __object_setattr(self, 'flag', flag)
    __object_setattr(self, 'kv_cache_tokens', kv_cache_tokens)
    __object_setattr(self, 'max_concurrency', max_concurrency)
    __object_setattr(self, 'why', why)
    __object_setattr(self, 'command', command)


def _145(self, settings, engine_version, gpu_memory, used, notes):
    __object_setattr(self, 'settings', settings)
    __object_setattr(self, 'engine_version', engine_version)
    __object_setattr(self, 'gpu_memory', gpu_memory)
    __object_setattr(self, 'used', used)
    __object_setattr(self, 'notes', notes)


def _146(self, settings=_D, remarks=_D):
    __object_setattr(self, 'settings', settings)
    __object_setattr(self, 'remarks', remarks)


def _147(self, severity, code, message, setting):
    __object_setattr(self, 'severity', severity)
    __object_setattr(self, 'code', code)
    __object_setattr(self, 'message', message)
    __object_setattr(self, 'setting', setting)


def _148(self, sha, files):
    __object_setattr(self, 'sha', sha)
    __object_setattr(self, 'files', files)


def _149(self, shared_prefix=_D, n=_D, beam_width=_D, prompt_len=_D):
    __object_setattr(self, 'shared_prefix', shared_prefix)
    __object_setattr(self, 'n', n)
    __object_setattr(self, 'beam_width', beam_width)
    __object_setattr(self, 'prompt_len', prompt_len)


def _150(self, spec, batch, tokens):
    __object_setattr(self, 'spec', spec)
    __object_setattr(self, 'batch', batch)
    __object_setattr(self, 'tokens', tokens)


def _151(self, spec, context, alloc_context, workload, speculation, extra, notes, estimate_kwargs):
    __object_setattr(self, 'spec', spec)
    __object_setattr(self, 'context', context)
    __object_setattr(self, 'alloc_context', alloc_context)
    __object_setattr(self, 'workload', workload)
    __object_setattr(self, 'speculation', speculation)
    __object_setattr(self, 'extra', extra)
    __object_setattr(self, 'notes', notes)
    __object_setattr(self, 'estimate_kwargs', estimate_kwargs)


def _152(self, spec, extra_tokens, notes, capped_at_max_model_len=_D, target=_D, speculation=_D, max_batch=_D, max_batch_reason=_D):
    __object_setattr(self, 'spec', spec)
    __object_setattr(self, 'extra_tokens', extra_tokens)
    __object_setattr(self, 'notes', notes)
    __object_setattr(self, 'capped_at_max_model_len', capped_at_max_model_len)
    __object_setattr(self, 'target', target)
    __object_setattr(self, 'speculation', speculation)
    __object_setattr(self, 'max_batch', max_batch)
    __object_setattr(self, 'max_batch_reason', max_batch_reason)


def _153(self, spec, name, total_bytes):
    __object_setattr(self, 'spec', spec)
    __object_setattr(self, 'name', name)
    __object_setattr(self, 'total_bytes', total_bytes)


def _154(self, step, length, checked, groups, writes, freed=_D):
    __object_setattr(self, 'step', step)
    __object_setattr(self, 'length', length)
    __object_setattr(self, 'checked', checked)
    __object_setattr(self, 'groups', groups)
    __object_setattr(self, 'writes', writes)
    __object_setattr(self, 'freed', freed)


def _155(self, step, length, predicted_bytes, referenced_bytes, blocks, tokens_ok, own_prompt_blocks):
    __object_setattr(self, 'step', step)
    __object_setattr(self, 'length', length)
    __object_setattr(self, 'predicted_bytes', predicted_bytes)
    __object_setattr(self, 'referenced_bytes', referenced_bytes)
    __object_setattr(self, 'blocks', blocks)
    __object_setattr(self, 'tokens_ok', tokens_ok)
    __object_setattr(self, 'own_prompt_blocks', own_prompt_blocks)


def _156(self, storage_bytes, allocated_bytes, reserved_bytes, driver_bytes, peak_allocated_bytes, component_bytes, allocator_bytes, segment_bytes, rounded_bytes=_D, unsplit_blocks=_D):
    __object_setattr(self, 'storage_bytes', storage_bytes)
    __object_setattr(self, 'allocated_bytes', allocated_bytes)
    __object_setattr(self, 'reserved_bytes', reserved_bytes)
    __object_setattr(self, 'driver_bytes', driver_bytes)
    __object_setattr(self, 'peak_allocated_bytes', peak_allocated_bytes)
    __object_setattr(self, 'component_bytes', component_bytes)
    __object_setattr(self, 'allocator_bytes', allocator_bytes)
    __object_setattr(self, 'segment_bytes', segment_bytes)
    __object_setattr(self, 'rounded_bytes', rounded_bytes)
    __object_setattr(self, 'unsplit_blocks', unsplit_blocks)


def _157(self, table_index, lo, rows, distinct, own_prompt_blocks):
    __object_setattr(self, 'table_index', table_index)
    __object_setattr(self, 'lo', lo)
    __object_setattr(self, 'rows', rows)
    __object_setattr(self, 'distinct', distinct)
    __object_setattr(self, 'own_prompt_blocks', own_prompt_blocks)


def _158(self, takes_bytes, refusal=_D, notes=_D):
    __object_setattr(self, 'takes_bytes', takes_bytes)
    __object_setattr(self, 'refusal', refusal)
    __object_setattr(self, 'notes', notes)


def _159(self, text, cut, size=_D):
    __object_setattr(self, 'text', text)
    __object_setattr(self, 'cut', cut)
    __object_setattr(self, 'size', size)


def _160(self, timeout_s, deadline, max_bytes, deadline_s):
    __object_setattr(self, 'timeout_s', timeout_s)
    __object_setattr(self, 'deadline', deadline)
    __object_setattr(self, 'max_bytes', max_bytes)
    __object_setattr(self, 'deadline_s', deadline_s)


def _161(self, timeout_s, tries, retry_delay_s, deadline_s):
    __object_setattr(self, 'timeout_s', timeout_s)
    __object_setattr(self, 'tries', tries)
    __object_setattr(self, 'retry_delay_s', retry_delay_s)
    __object_setattr(self, 'deadline_s', deadline_s)


def _162(self, title, columns, rows, caption=_D):
    __object_setattr(self, 'title', title)
    __object_setattr(self, 'columns', columns)
    __object_setattr(self, 'rows', rows)
    __object_setattr(self, 'caption', caption)


def _163(self, title, columns, rows, show_header=_D, fold=_D):
    __object_setattr(self, 'title', title)
    __object_setattr(self, 'columns', columns)
    __object_setattr(self, 'rows', rows)
    __object_setattr(self, 'show_header', show_header)
    __object_setattr(self, 'fold', fold)


def _164(self, title=_D, prefix_note=_D):
    __object_setattr(self, 'title', title)
    __object_setattr(self, 'prefix_note', prefix_note)


def _165(self, title=_D, prefix_note=_D, align=_D):
    __object_setattr(self, 'title', title)
    __object_setattr(self, 'prefix_note', prefix_note)
    __object_setattr(self, 'align', align)


def _166(self, tokens, requests, graph_batch):
    __object_setattr(self, 'tokens', tokens)
    __object_setattr(self, 'requests', requests)
    __object_setattr(self, 'graph_batch', graph_batch)


def _167(self, total, by_component, assumptions=_D, tensors=_D):
    __object_setattr(self, 'total', total)
    __object_setattr(self, 'by_component', by_component)
    __object_setattr(self, 'assumptions', assumptions)
    __object_setattr(self, 'tensors', tensors)


def _168(self, total_bytes, items, kv_cache_bytes, defaults=_D, assumptions=_D, kv_error=_D):
    __object_setattr(self, 'total_bytes', total_bytes)
    __object_setattr(self, 'items', items)
    __object_setattr(self, 'kv_cache_bytes', kv_cache_bytes)
    __object_setattr(self, 'defaults', __factory_defaults() if defaults is __MISSING else defaults)
    __object_setattr(self, 'assumptions', assumptions)
    __object_setattr(self, 'kv_error', kv_error)


def _169(self, total_size, total_parameters):
    __object_setattr(self, 'total_size', total_size)
    __object_setattr(self, 'total_parameters', total_parameters)


def _170(self, tp=_D, pp=_D, expert_parallel=_D, gpus_per_node=_D):
    __object_setattr(self, 'tp', tp)
    __object_setattr(self, 'pp', pp)
    __object_setattr(self, 'expert_parallel', expert_parallel)
    __object_setattr(self, 'gpus_per_node', gpus_per_node)


def _171(self, type, factor=_D, original_max_position_embeddings=_D, extends_to=_D):
    __object_setattr(self, 'type', type)
    __object_setattr(self, 'factor', factor)
    __object_setattr(self, 'original_max_position_embeddings', original_max_position_embeddings)
    __object_setattr(self, 'extends_to', extends_to)


def _172(self, types, group_size, groups_per_type, hybrid, in_flight_batches=_D, state_pages=_D, reserved_blocks=_D):
    __object_setattr(self, 'types', types)
    __object_setattr(self, 'group_size', group_size)
    __object_setattr(self, 'groups_per_type', groups_per_type)
    __object_setattr(self, 'hybrid', hybrid)
    __object_setattr(self, 'in_flight_batches', in_flight_batches)
    __object_setattr(self, 'state_pages', state_pages)
    __object_setattr(self, 'reserved_blocks', reserved_blocks)


def _173(self, types, kv_heads, head_dims, window, shared):
    __object_setattr(self, 'types', types)
    __object_setattr(self, 'kv_heads', kv_heads)
    __object_setattr(self, 'head_dims', head_dims)
    __object_setattr(self, 'window', window)
    __object_setattr(self, 'shared', shared)


def _174(self, value, reserved_mib, source, notes=_D, reads_gpu=_D):
    __object_setattr(self, 'value', value)
    __object_setattr(self, 'reserved_mib', reserved_mib)
    __object_setattr(self, 'source', source)
    __object_setattr(self, 'notes', notes)
    __object_setattr(self, 'reads_gpu', reads_gpu)


def _175(self, window, less=_D):
    __object_setattr(self, 'window', window)
    __object_setattr(self, 'less', less)


def _176(self, window, ubatch, pad):
    __object_setattr(self, 'window', window)
    __object_setattr(self, 'ubatch', ubatch)
    __object_setattr(self, 'pad', pad)


def _177(self, *, kind, count=_D):
    __object_setattr(self, 'kind', kind)
    __object_setattr(self, 'count', count)
    self.__post_init__()


def _178(self, *, kind, count=_D, kv_heads, head_dim, v_head_dim=_D):
    __object_setattr(self, 'kind', kind)
    __object_setattr(self, 'count', count)
    __object_setattr(self, 'kv_heads', kv_heads)
    __object_setattr(self, 'head_dim', head_dim)
    __object_setattr(self, 'v_head_dim', v_head_dim)
    self.__post_init__()


def _179(self, *, kind=_D, count=_D):
    __object_setattr(self, 'kind', kind)
    __object_setattr(self, 'count', count)
    self.__post_init__()


def _180(self, *, kind=_D, count=_D, kv_heads, head_dim, v_head_dim=_D):
    __object_setattr(self, 'kind', kind)
    __object_setattr(self, 'count', count)
    __object_setattr(self, 'kv_heads', kv_heads)
    __object_setattr(self, 'head_dim', head_dim)
    __object_setattr(self, 'v_head_dim', v_head_dim)
    self.__post_init__()


def _181(self, *, kind=_D, count=_D, kv_heads, head_dim, v_head_dim=_D, chunk):
    __object_setattr(self, 'kind', kind)
    __object_setattr(self, 'count', count)
    __object_setattr(self, 'kv_heads', kv_heads)
    __object_setattr(self, 'head_dim', head_dim)
    __object_setattr(self, 'v_head_dim', v_head_dim)
    __object_setattr(self, 'chunk', chunk)
    self.__post_init__()


def _182(self, *, kind=_D, count=_D, kv_heads, head_dim, v_head_dim=_D, window):
    __object_setattr(self, 'kind', kind)
    __object_setattr(self, 'count', count)
    __object_setattr(self, 'kv_heads', kv_heads)
    __object_setattr(self, 'head_dim', head_dim)
    __object_setattr(self, 'v_head_dim', v_head_dim)
    __object_setattr(self, 'window', window)
    self.__post_init__()


def _183(self, *, kind=_D, count=_D, mixer=_D, conv_dim, conv_kernel, ssm_state):
    __object_setattr(self, 'kind', kind)
    __object_setattr(self, 'count', count)
    __object_setattr(self, 'mixer', mixer)
    __object_setattr(self, 'conv_dim', conv_dim)
    __object_setattr(self, 'conv_kernel', conv_kernel)
    __object_setattr(self, 'ssm_state', ssm_state)
    self.__post_init__()


def _184(self, *, kind=_D, count=_D, shares_with):
    __object_setattr(self, 'kind', kind)
    __object_setattr(self, 'count', count)
    __object_setattr(self, 'shares_with', shares_with)
    self.__post_init__()


def _185(self, *, kind=_D, count=_D, v_head_dim=_D, kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim=_D, num_heads=_D):
    __object_setattr(self, 'kind', kind)
    __object_setattr(self, 'count', count)
    __object_setattr(self, 'v_head_dim', v_head_dim)
    __object_setattr(self, 'kv_lora_rank', kv_lora_rank)
    __object_setattr(self, 'qk_rope_head_dim', qk_rope_head_dim)
    __object_setattr(self, 'qk_nope_head_dim', qk_nope_head_dim)
    __object_setattr(self, 'num_heads', num_heads)
    self.__post_init__()


def _186(self, block_size=_D, tp=_D, swa_full=_D, async_scheduling=_D, kv_cache=_D, backend=_D, nbits=_D, residual_length=_D, q_group_size=_D, axis_key=_D, axis_value=_D, prompt_len=_D, evict=_D, press=_D, compression_ratio=_D, kv_offloading_bytes=_D, swap_space_bytes=_D, hicache_ratio=_D, hicache_size_gb=_D, host_cache_bytes=_D, offload_link=_D, lmcache=_D, no_kv_offload=_D):
    __object_setattr(self, 'block_size', block_size)
    __object_setattr(self, 'tp', tp)
    __object_setattr(self, 'swa_full', swa_full)
    __object_setattr(self, 'async_scheduling', async_scheduling)
    __object_setattr(self, 'kv_cache', kv_cache)
    __object_setattr(self, 'backend', backend)
    __object_setattr(self, 'nbits', nbits)
    __object_setattr(self, 'residual_length', residual_length)
    __object_setattr(self, 'q_group_size', q_group_size)
    __object_setattr(self, 'axis_key', axis_key)
    __object_setattr(self, 'axis_value', axis_value)
    __object_setattr(self, 'prompt_len', prompt_len)
    __object_setattr(self, 'evict', evict)
    __object_setattr(self, 'press', press)
    __object_setattr(self, 'compression_ratio', compression_ratio)
    __object_setattr(self, 'kv_offloading_bytes', kv_offloading_bytes)
    __object_setattr(self, 'swap_space_bytes', swap_space_bytes)
    __object_setattr(self, 'hicache_ratio', hicache_ratio)
    __object_setattr(self, 'hicache_size_gb', hicache_size_gb)
    __object_setattr(self, 'host_cache_bytes', host_cache_bytes)
    __object_setattr(self, 'offload_link', offload_link)
    __object_setattr(self, 'lmcache', lmcache)
    __object_setattr(self, 'no_kv_offload', no_kv_offload)
    self.__post_init__()


def _187(self, gpu_memory_utilization=_D, kv_cache_memory_bytes=_D, max_num_batched_tokens=_D, max_num_seqs=_D, enforce_eager=_D, mem_fraction_static=_D, free_gpu_memory_fraction=_D, weights_bytes=_D, activation_bytes=_D, non_torch_bytes=_D, cudagraph_bytes=_D, max_kv_tokens=_D, engine_buffer_bytes=_D, usage_context=_D, model_runner=_D, vllm_engine=_D, trtllm_backend=_D, vllm_sampler=_D, language_model_only=_D, cpu_offload_bytes=_D, expert_dp=_D, device_used_bytes=_D):
    __object_setattr(self, 'gpu_memory_utilization', gpu_memory_utilization)
    __object_setattr(self, 'kv_cache_memory_bytes', kv_cache_memory_bytes)
    __object_setattr(self, 'max_num_batched_tokens', max_num_batched_tokens)
    __object_setattr(self, 'max_num_seqs', max_num_seqs)
    __object_setattr(self, 'enforce_eager', enforce_eager)
    __object_setattr(self, 'mem_fraction_static', mem_fraction_static)
    __object_setattr(self, 'free_gpu_memory_fraction', free_gpu_memory_fraction)
    __object_setattr(self, 'weights_bytes', weights_bytes)
    __object_setattr(self, 'activation_bytes', activation_bytes)
    __object_setattr(self, 'non_torch_bytes', non_torch_bytes)
    __object_setattr(self, 'cudagraph_bytes', cudagraph_bytes)
    __object_setattr(self, 'max_kv_tokens', max_kv_tokens)
    __object_setattr(self, 'engine_buffer_bytes', engine_buffer_bytes)
    __object_setattr(self, 'usage_context', usage_context)
    __object_setattr(self, 'model_runner', model_runner)
    __object_setattr(self, 'vllm_engine', vllm_engine)
    __object_setattr(self, 'trtllm_backend', trtllm_backend)
    __object_setattr(self, 'vllm_sampler', vllm_sampler)
    __object_setattr(self, 'language_model_only', language_model_only)
    __object_setattr(self, 'cpu_offload_bytes', cpu_offload_bytes)
    __object_setattr(self, 'expert_dp', expert_dp)
    __object_setattr(self, 'device_used_bytes', device_used_bytes)
    self.__post_init__()


def _188(self, id, model_type, layers, dtype=_D, source=_D, revision=_D, max_position_embeddings=_D, rope_scaling=_D, num_attention_heads=_D, hidden_size=_D, vocab_size=_D, mlp_width=_D, num_experts=_D, experts_per_token=_D, routed_expert_params=_D, mtp_layers=_D, params=_D, weights_bytes=_D, mtp_weights_bytes=_D, expert_weights_bytes=_D, weights_dtype=_D, weights_source=_D, aliases=_D, assumptions=_D):
    __object_setattr(self, 'id', id)
    __object_setattr(self, 'model_type', model_type)
    __object_setattr(self, 'layers', layers)
    __object_setattr(self, 'dtype', dtype)
    __object_setattr(self, 'source', source)
    __object_setattr(self, 'revision', revision)
    __object_setattr(self, 'max_position_embeddings', max_position_embeddings)
    __object_setattr(self, 'rope_scaling', rope_scaling)
    __object_setattr(self, 'num_attention_heads', num_attention_heads)
    __object_setattr(self, 'hidden_size', hidden_size)
    __object_setattr(self, 'vocab_size', vocab_size)
    __object_setattr(self, 'mlp_width', mlp_width)
    __object_setattr(self, 'num_experts', num_experts)
    __object_setattr(self, 'experts_per_token', experts_per_token)
    __object_setattr(self, 'routed_expert_params', routed_expert_params)
    __object_setattr(self, 'mtp_layers', mtp_layers)
    __object_setattr(self, 'params', params)
    __object_setattr(self, 'weights_bytes', weights_bytes)
    __object_setattr(self, 'mtp_weights_bytes', mtp_weights_bytes)
    __object_setattr(self, 'expert_weights_bytes', expert_weights_bytes)
    __object_setattr(self, 'weights_dtype', weights_dtype)
    __object_setattr(self, 'weights_source', weights_source)
    __object_setattr(self, 'aliases', aliases)
    __object_setattr(self, 'assumptions', assumptions)
    self.__post_init__()


def _189(self, id, model_type, layers, dtype=_D, source=_D, revision=_D, max_position_embeddings=_D, rope_scaling=_D, num_attention_heads=_D, hidden_size=_D, vocab_size=_D, mlp_width=_D, num_experts=_D, experts_per_token=_D, routed_expert_params=_D, mtp_layers=_D, params=_D, weights_bytes=_D, mtp_weights_bytes=_D, expert_weights_bytes=_D, weights_dtype=_D, weights_source=_D, aliases=_D, assumptions=_D, draft_from=_D, draft_behind=_D, method=_D):
    __object_setattr(self, 'id', id)
    __object_setattr(self, 'model_type', model_type)
    __object_setattr(self, 'layers', layers)
    __object_setattr(self, 'dtype', dtype)
    __object_setattr(self, 'source', source)
    __object_setattr(self, 'revision', revision)
    __object_setattr(self, 'max_position_embeddings', max_position_embeddings)
    __object_setattr(self, 'rope_scaling', rope_scaling)
    __object_setattr(self, 'num_attention_heads', num_attention_heads)
    __object_setattr(self, 'hidden_size', hidden_size)
    __object_setattr(self, 'vocab_size', vocab_size)
    __object_setattr(self, 'mlp_width', mlp_width)
    __object_setattr(self, 'num_experts', num_experts)
    __object_setattr(self, 'experts_per_token', experts_per_token)
    __object_setattr(self, 'routed_expert_params', routed_expert_params)
    __object_setattr(self, 'mtp_layers', mtp_layers)
    __object_setattr(self, 'params', params)
    __object_setattr(self, 'weights_bytes', weights_bytes)
    __object_setattr(self, 'mtp_weights_bytes', mtp_weights_bytes)
    __object_setattr(self, 'expert_weights_bytes', expert_weights_bytes)
    __object_setattr(self, 'weights_dtype', weights_dtype)
    __object_setattr(self, 'weights_source', weights_source)
    __object_setattr(self, 'aliases', aliases)
    __object_setattr(self, 'assumptions', assumptions)
    __object_setattr(self, 'draft_from', draft_from)
    __object_setattr(self, 'draft_behind', draft_behind)
    __object_setattr(self, 'method', method)
    self.__post_init__()


def _190(self, method, num_speculative_tokens, draft=_D, mtp_layers=_D):
    __object_setattr(self, 'method', method)
    __object_setattr(self, 'num_speculative_tokens', num_speculative_tokens)
    __object_setattr(self, 'draft', draft)
    __object_setattr(self, 'mtp_layers', mtp_layers)
    self.__post_init__()


def _191(self, prompt_len, output_len=_D, shared_prefix=_D, n=_D, beam_width=_D, proposer=_D):
    __object_setattr(self, 'prompt_len', prompt_len)
    __object_setattr(self, 'output_len', output_len)
    __object_setattr(self, 'shared_prefix', shared_prefix)
    __object_setattr(self, 'n', n)
    __object_setattr(self, 'beam_width', beam_width)
    __object_setattr(self, 'proposer', proposer)
    self.__post_init__()


INITS = {
    '00:catalog_file=,gpu=,specs=(),online=,calibration=,_catalog=,_models=(),_plans=(),_gpu_labels=()': _0,
    '00:engine,launcher,line,model=,options=(),others=(),environment=()': _1,
    '00:files,tensors,bytes,params,bytes_by_dtype,params_by_dtype,meta_bytes,packed,notes=()': _2,
    '00:files=(),strict=,kvplan_version=': _3,
    '00:key,flag,value,line,unresolved=': _4,
    '00:name,file,line,source,model=,base_dir=,gpus=(),gpu_count=,engine=,engine_version=,image=,settings=(),requirements=(),unknowns=(),notes=(),host_memory=,pods=,devices=': _5,
    '00:name,file,line,source,model=,gpu=,gpu_count=,engine=,engine_version=,tp=,pp=,dp=,kv_dtype=,max_model_len=,max_num_seqs=,kv_cache_bytes_per_gpu=,request_kv_bytes=,max_model_len_fit=,max_concurrency=,kv_cache_tokens=,findings=(),assumptions=(),offload=,weights_bytes_per_gpu=,fixes=(),tenant=': _6,
    '00:out,settings,memory,derived,notes,line_of,tokens': _7,
    '00:path,format=,findings=(),deployments=(),skipped=': _8,
    '00:plan,device,buffers,views,before': _9,
    '00:spelled,raw,line,names=': _10,
    '00:text,line=,shell=': _11,
    '00:value,line,spelled,raw=': _12,
    '01:severity,code,message,file,line=,deployment=,value=,fits=,suggestion=,invalid_input=': _13,
    '10:': _14,
    '10:across_requests,across_samples': _15,
    '10:allocated,reserved,driver_used,peak_allocated': _16,
    '10:allocated,reserved,rounded,unsplit': _17,
    '10:backend,keys,values,residual_length': _18,
    '10:batch,context,kv_dtype,kv_bytes,bytes_per_token,layers=,kv_dtype_resolved=,sharing=,admission_kv_bytes=': _19,
    '10:batch,fits,bytes,allocated': _20,
    '10:batch,plan,row,measured,tables,timing,decoded,search,predicted_max': _21,
    '10:block,chunk,lag=': _22,
    '10:block,window,lag=': _23,
    '10:block_size,num_blocks,kv_cache_tokens,max_concurrency,concurrency_per_replica,max_batch,max_context,max_model_len_fit,request_bytes,fits,assumptions=,admission_note=,state_slots=': _24,
    '10:block_size,types,group_size,groups_per_type,padding_layers,bytes_per_block,in_flight_batches=,state_pages=,reserved_blocks=': _25,
    '10:budget_bytes,measured,probes': _26,
    '10:budget_bytes,weights_bytes,activation_bytes,cudagraph_bytes,non_torch_bytes,kv_cache_bytes': _27,
    '10:buffers,layers,num_blocks=,group_size=,padding_layers=,notes=,block_tables=': _28,
    '10:bytes,formula': _29,
    '10:bytes,formula,assumptions': _30,
    '10:bytes,op,held=': _31,
    '10:bytes,step_bytes,text': _32,
    '10:bytes,what': _33,
    '10:cal,model,here,total,gpu_total,version,settings,common,notes,used,probe': _34,
    '10:chunk_size=,local_cpu=,max_local_cpu_size=,local_disk=,max_local_disk_size=,save_unfull_chunk=,save_decode_cache=,enable_blending=,save_only_first_rank=,first_rank_max_local_cpu_size=,given=,ignored=': _35,
    '10:command,estimates,plans,fit,gpu': _36,
    '10:component,module,shape,count=,linear=,fp32=': _37,
    '10:context=,context_nvswitch_tp=': _38,
    '10:contexts,splits,guessed_context,batches,dtype_names': _39,
    '10:deployment,setting,flag,value,order': _40,
    '10:deployments,total_bytes': _41,
    '10:device,item,value,line': _42,
    '10:dtype,block,model_bytes,tp': _43,
    '10:dtype,block,state_costs,chunked_as_full,lag': _44,
    '10:dtype,has_swa': _45,
    '10:dtype,page,windowed': _46,
    '10:dtype,version,assumptions,static': _47,
    '10:engine,commands=,modules=,flags=,underscores=,images=,fp8_kv_flag=,parse_int=,speculation=,booleans=,floats=,env_prefixes=,reader=,environment=,wrappers=,tagged_images=,default_serve=,config_files=,config_keys=,merge=,model_reader=,short_pool=,hosts=,host_modules=,unread_host_modules=,default_image=,image_settings=': _48,
    '10:engine,engine_version,kv_dtype,block_size,device,find_max_batch,gpu_memory_utilization,memory_budget,with_weights,decode,repeats,gpu,workload': _49,
    '10:engine,engine_version,kv_dtype,block_size,groups,assumptions=,pool=': _50,
    '10:engine,format,settings,memory,derived=,num_gpu_blocks=,kv_cache_tokens=,max_concurrency=,concurrency_len=,counts=(),ranks=,lines_read=,bytes_read=,cut=,complete=,notes=,lines=(),detected=,impossible=,startups=,size=,per_rank=,per_device=': _51,
    '10:engine,title,markers,read,sources=,finish=,implied_version=,logged_settings=,carried=,profile_settings=,calibrate=,startups=': _52,
    '10:engine_options=,settings=,sharing=,remarks=,max_kv_tokens=,beam_width=,parallel=': _53,
    '10:gpu,engine,engine_version,kv_dtype,tp,pp,dp,gpus,nodes,kv_cache_tokens,max_concurrency,kv_left_bytes,decode_step_seconds_min,output_tokens_per_second_max,ttft_seconds_min,usd_per_hour,usd_per_million_output_tokens,command,assumptions=,plan=,beside=': _54,
    '10:gpu,engine,kv_dtype,reason': _55,
    '10:gpu,total_bytes,orders,fixes=': _56,
    '10:gpu_mib,tp=,pp=,speculative=,mla=,model_type=,model_id=,chunked_prefill_size=,context_length=,enforce_eager=,cpu_offload=,amd=,multimodal=': _57,
    '10:held,once=,shared=,spans=': _58,
    '10:id,source,model_type,num_layers,layer_kinds,params,weights_bytes,dtype,max_position_embeddings,mtp_layers=,mtp_weights_bytes=': _59,
    '10:index,kind,component,layer,attend,layout': _60,
    '10:index,kind,tokens_held,bytes': _61,
    '10:inner,heads,head_dim,state,groups,kernel': _62,
    '10:inner,page': _63,
    '10:item,unit,logged,step,text,derived,line,kvplan': _64,
    '10:items,kept_bytes,peak_bytes,how': _65,
    '10:keep,recent,keep_name=': _66,
    '10:kept,prompt_len=': _67,
    '10:kind,disk_bytes,blocks,tokens,requests': _68,
    '10:kind,host_bytes,blocks,block_size,tokens,pinned_bytes,requests,request_bytes_per_gpu,link,restore_seconds,disk=,remarks=,held_bytes=,pinned_range=': _69,
    '10:kind,span,block_size,page_bytes,layers,rule': _70,
    '10:kind,title,caption,x_label,y_label,series,categories=,log_x=,reference=,vertical=,log_y=,y_floor=,data=(),below=': _71,
    '10:kv_dtype,count,kind,tokens_held_formula,once_tokens,per_request_tokens,per_sequence_tokens,tokens,plain_tokens': _72,
    '10:kv_dtype,kv_dtype_resolved,batches,contexts,kv_bytes,bytes_per_token,admission_kv_bytes': _73,
    '10:kv_dtype,layers,count,kind,bytes_per_token,token_formula,tokens_held_formula,state_bytes,state_formula': _74,
    '10:kvplan_version,engine,engine_version,block_size,model,rows,formulas,assumptions=,sharing=,sharing_terms=,engine_options=(),speculation=': _75,
    '10:kvplan_version,engine,engine_version,model_id,gpu_name,gpu_total_bytes,gpu_count,tp,pp,dp,kv_dtype,per_gpu,items,block_size,num_blocks,kv_cache_tokens,max_model_len,context,batch,max_concurrency,max_batch,max_context,fits,request_kv_bytes,max_model_len_fit,decode_step_seconds_min,decode_tokens_per_second_max,engine_defaults=(),assumptions=,admission_note=,shared_prefix=,max_batch_plain=,n=,beam_width=,offload=,speculation=,mtp_layers=,mtp_weights_bytes=,misfit=,ep=,interval=,solved=,state_slots=,asked=': _76,
    '10:kvplan_version,model_id,context,concurrency,prompt_len,gpus_per_node,rows,refused,currency,assumptions=,beside=': _77,
    '10:kvplan_version,model_id,device,device_name,device_total_bytes,engine,engine_version,block_size,batch,context,kv_dtype,predicted_bytes,measured_storage_bytes,allocated_bytes,reserved_bytes,driver_bytes,peak_allocated_bytes,allocator_bytes,segment_bytes,buffers,num_blocks,components,released,max_batch=,decode=,notes=,sharing=,allocator_rounded_bytes=,unsplit_blocks=': _78,
    '10:kvplan_version,model_id,engine,engine_version,kv_dtype,block_size,batch,context,tp,pp,backend,launcher,ranks,notes=,sharing=': _79,
    '10:label,x,y,band=,band_label=,none=': _80,
    '10:layer,first_layer,token,tokens=,state=,block_size=,cache_kind=,padding=': _81,
    '10:layer,first_layer,token,tokens=,state=,block_size=,cache_kind=,padding=,keys=,values=,k_shape=,v_shape=,elem_bytes=': _82,
    '10:layer,role,dtype,shape,offset=,pitch=': _83,
    '10:layers,first_block,requests,samples,once,per_request,per_sequence,default_block_size=': _84,
    '10:layers,hidden,mlp=,patch_values=,patches_per_item=,tokens_per_item=,embeds_per_item=,masked_attention=,transformers_tower=,where=,gated_mlp=,output_widths=,sized_by=': _85,
    '10:layers,sequences,blocks,referenced_blocks,once,per_request,per_sequence,referenced_bytes': _86,
    '10:less': _87,
    '10:linear,other,how': _88,
    '10:low,high,basis,thin=': _89,
    '10:max_model_len,context,batch,limit=,shared_prefix=,proposer=,n=,beam_width=,prompt_len=,gpu_name=,gpu_vendor=,speculative=,dp=': _90,
    '10:max_num_batched_tokens,max_num_seqs,why': _91,
    '10:method,max_batch=': _92,
    '10:method=,bits=,four_bit_bytes=,name=': _93,
    '10:model,context,concurrency=': _94,
    '10:model,gpu,engine_version,plan,assumptions,biggest,biggest_item=': _95,
    '10:model,setting,flag,fraction,beside_fraction,fits,reason,share=': _96,
    '10:model,tp=,pp=,dp=,max_model_len=,kv_dtype=,expert_parallel=': _97,
    '10:model=,engine_version=,gpu_name=,tp=,pp=,dtype=,kv_dtype=,max_model_len=,gpu_memory_utilization=,mem_fraction_static=,max_num_batched_tokens=,max_num_seqs=,block_size=,enforce_eager=,vllm_sampler=': _98,
    '10:model_id,device,transformers_version,attn_implementation,batch,tokens,dtype,weights_bytes,cache_bytes,cache_storage_bytes,predicted_cache_bytes,peak_bytes,activation_bytes,predicted_activation_bytes,predicted_formula,skipped=,notes=,blas_workspace_bytes=': _99,
    '10:model_id,engine,engine_version,kv_dtype,block_size,batch,context,predicted_bytes,buffers,components,layers,num_blocks=,group_size=,padding_layers=,notes=,block_tables=': _100,
    '10:name,aliases,vendor,memory_bytes,bandwidth,tflops,sources=(),marketing_memory_gb=,memory_precision=,estimate=,notes=,origin=,unified_memory=': _101,
    '10:name,attention=,mlp=,rope_bytes_per_token=,qk_norm=,norms=,router_weight_bytes=,router_logit_bytes=,expert_bias=,modeled=': _102,
    '10:name,block_elems,block_bytes,scale_bytes_per_vector=,description=': _103,
    '10:name,bytes,tag,note=': _104,
    '10:name,bytes_per_s,source,aliases=': _105,
    '10:name,dtype,shape,views': _106,
    '10:name,engine,settings,plan_at': _107,
    '10:name,engine,used_before_bytes,starts,reason,takes_bytes,kv_cache_bytes,kv_cache_tokens,max_concurrency,fits=,capped=,notes=': _108,
    '10:name,flags,help,target,field=,convert=,switch=,estimate=,file_key=,serve=,refusal=,combined=': _109,
    '10:name,kind,layers,predicted_bytes,formula': _110,
    '10:name,kind,layers,predicted_bytes,measured_bytes': _111,
    '10:name,layers,params=,defaults=(),mha=,tied_by_default=,own_towers=,known=,mtp=': _112,
    '10:name=': _113,
    '10:name=,prebuilt_engine=': _114,
    '10:name=,title=,default_version=,newest_rules=,extra_options=': _115,
    '10:name=,title=,default_version=,newest_rules=,memory_fraction=,extra_options=': _116,
    '10:name=,title=,default_version=,newest_rules=,memory_fraction=,extra_options=,dp_shares_experts=': _117,
    '10:name=,title=,default_version=,newest_rules=,memory_fraction=,vendors=,extra_options=,unfit=': _118,
    '10:name=,title=,default_version=,newest_rules=,static=,library=,extra_options=': _119,
    '10:nbits,axis,group_size': _120,
    '10:non_torch_tp1=,non_torch_tp=,non_torch_pp=,non_torch_all_tp1=,non_torch_all_tp=,non_torch_all_pp=,non_torch_v06=,non_torch_v0_tp1=,non_torch_v0_tp=': _121,
    '10:num_blocks,kv_cache_tokens,max_concurrency,blocks_per_request,request_bytes': _122,
    '10:number,rank,label,text': _123,
    '10:once,per_request,per_sequence,samples': _124,
    '10:pad': _125,
    '10:per_gpu_hour,currency=,source=': _126,
    '10:per_request,slots,state_bytes,token_bytes,max_running_requests,rule': _127,
    '10:predicted,measured,budget_bytes,probes,from_estimate=': _128,
    '10:prompt_len,output_len,sequences,kv_bytes_plain': _129,
    '10:prompt_len,output_len,shared_prefix,n,beam_width,sequences,kv_bytes_plain,referenced_bytes,block_tables=,speculative_method=,num_speculative_tokens=,extra_slots=,draft=': _130,
    '10:qkv_bias=,o_bias=,qkv_bias_field=,qk_norm=,norms=,moe=,shared_expert_gate=,mtp=,note=': _131,
    '10:quant,rule,version,elem_bytes': _132,
    '10:rank,tp_rank,pp_rank,first_layer,num_layers,plan,work=': _133,
    '10:rank,tp_rank,pp_rank,local_rank,host,device,device_name,device_total_bytes,first_layer,num_layers,predicted_bytes,measured_storage_bytes,allocated_bytes,reserved_bytes,driver_bytes,peak_allocated_bytes,buffers,num_blocks,components,released,error=,referenced_bytes=': _134,
    '10:rank,world_size,local_rank': _135,
    '10:ratio': _136,
    '10:ratio,layer,layers,window=,beta=': _137,
    '10:replan,context=,concurrency=': _138,
    '10:repo,revision,endpoint,cache,offline,fallback,tries,timeout_s': _139,
    '10:residual_length,prompt_len=': _140,
    '10:seconds,bound_seconds,peak_workspace_bytes,read_bytes,repeats,gpu,steps=': _141,
    '10:seconds,repeats,read_bytes,peak_workspace_bytes,layers': _142,
    '10:setting,engines,titles,own_names=': _143,
    '10:setting,value,flag,kv_cache_tokens,max_concurrency,why,command=': _144,
    '10:settings,engine_version,gpu_memory,used,notes': _145,
    '10:settings=,remarks=': _146,
    '10:severity,code,message,setting': _147,
    '10:sha,files': _148,
    '10:shared_prefix=,n=,beam_width=,prompt_len=': _149,
    '10:spec,batch,tokens': _150,
    '10:spec,context,alloc_context,workload,speculation,extra,notes,estimate_kwargs': _151,
    '10:spec,extra_tokens,notes,capped_at_max_model_len=,target=,speculation=,max_batch=,max_batch_reason=': _152,
    '10:spec,name,total_bytes': _153,
    '10:step,length,checked,groups,writes,freed=': _154,
    '10:step,length,predicted_bytes,referenced_bytes,blocks,tokens_ok,own_prompt_blocks': _155,
    '10:storage_bytes,allocated_bytes,reserved_bytes,driver_bytes,peak_allocated_bytes,component_bytes,allocator_bytes,segment_bytes,rounded_bytes=,unsplit_blocks=': _156,
    '10:table_index,lo,rows,distinct,own_prompt_blocks': _157,
    '10:takes_bytes,refusal=,notes=': _158,
    '10:text,cut,size=': _159,
    '10:timeout_s,deadline,max_bytes,deadline_s': _160,
    '10:timeout_s,tries,retry_delay_s,deadline_s': _161,
    '10:title,columns,rows,caption=': _162,
    '10:title,columns,rows,show_header=,fold=': _163,
    '10:title=,prefix_note=': _164,
    '10:title=,prefix_note=,align=': _165,
    '10:tokens,requests,graph_batch': _166,
    '10:total,by_component,assumptions=,tensors=': _167,
    '10:total_bytes,items,kv_cache_bytes,defaults=(),assumptions=,kv_error=': _168,
    '10:total_size,total_parameters': _169,
    '10:tp=,pp=,expert_parallel=,gpus_per_node=': _170,
    '10:type,factor=,original_max_position_embeddings=,extends_to=': _171,
    '10:types,group_size,groups_per_type,hybrid,in_flight_batches=,state_pages=,reserved_blocks=': _172,
    '10:types,kv_heads,head_dims,window,shared': _173,
    '10:value,reserved_mib,source,notes=,reads_gpu=': _174,
    '10:window,less=': _175,
    '10:window,ubatch,pad': _176,
    '11:*kind,*count=': _177,
    '11:*kind,*count=,*kv_heads,*head_dim,*v_head_dim=': _178,
    '11:*kind=,*count=': _179,
    '11:*kind=,*count=,*kv_heads,*head_dim,*v_head_dim=': _180,
    '11:*kind=,*count=,*kv_heads,*head_dim,*v_head_dim=,*chunk': _181,
    '11:*kind=,*count=,*kv_heads,*head_dim,*v_head_dim=,*window': _182,
    '11:*kind=,*count=,*mixer=,*conv_dim,*conv_kernel,*ssm_state': _183,
    '11:*kind=,*count=,*shares_with': _184,
    '11:*kind=,*count=,*v_head_dim=,*kv_lora_rank,*qk_rope_head_dim,*qk_nope_head_dim=,*num_heads=': _185,
    '11:block_size=,tp=,swa_full=,async_scheduling=,kv_cache=,backend=,nbits=,residual_length=,q_group_size=,axis_key=,axis_value=,prompt_len=,evict=,press=,compression_ratio=,kv_offloading_bytes=,swap_space_bytes=,hicache_ratio=,hicache_size_gb=,host_cache_bytes=,offload_link=,lmcache=,no_kv_offload=': _186,
    '11:gpu_memory_utilization=,kv_cache_memory_bytes=,max_num_batched_tokens=,max_num_seqs=,enforce_eager=,mem_fraction_static=,free_gpu_memory_fraction=,weights_bytes=,activation_bytes=,non_torch_bytes=,cudagraph_bytes=,max_kv_tokens=,engine_buffer_bytes=,usage_context=,model_runner=,vllm_engine=,trtllm_backend=,vllm_sampler=,language_model_only=,cpu_offload_bytes=,expert_dp=,device_used_bytes=': _187,
    '11:id,model_type,layers,dtype=,source=,revision=,max_position_embeddings=,rope_scaling=,num_attention_heads=,hidden_size=,vocab_size=,mlp_width=,num_experts=,experts_per_token=,routed_expert_params=,mtp_layers=,params=,weights_bytes=,mtp_weights_bytes=,expert_weights_bytes=,weights_dtype=,weights_source=,aliases=,assumptions=': _188,
    '11:id,model_type,layers,dtype=,source=,revision=,max_position_embeddings=,rope_scaling=,num_attention_heads=,hidden_size=,vocab_size=,mlp_width=,num_experts=,experts_per_token=,routed_expert_params=,mtp_layers=,params=,weights_bytes=,mtp_weights_bytes=,expert_weights_bytes=,weights_dtype=,weights_source=,aliases=,assumptions=,draft_from=,draft_behind=,method=': _189,
    '11:method,num_speculative_tokens,draft=,mtp_layers=': _190,
    '11:prompt_len,output_len=,shared_prefix=,n=,beam_width=,proposer=': _191,
}
