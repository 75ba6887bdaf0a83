"""Client-side loading: template + environments + get_file contents.

Produces a :class:`Bundle`, which is everything the engine needs to build a
stack definition, JSON-serialisable so the engine can store it.
"""

import json
import math
import os
import urllib.parse
import urllib.request

import yaml

from converge import breakpoints
from converge import exception
from converge.template import bounds
from converge.template import formats

_Base = getattr(yaml, 'CSafeLoader', yaml.SafeLoader)


class Loader(_Base):
    """A safe loader that keeps timestamps and dates as strings."""


def _construct_str(loader, node):
    return loader.construct_scalar(node)


Loader.add_constructor('tag:yaml.org,2002:timestamp', _construct_str)


def _construct_float(loader, node):
    """A float; .nan and .inf are refused: nan passes every range
    constraint, and neither is JSON (the API could not answer with it,
    nor a database's JSON column store it)."""
    value = loader.construct_yaml_float(node)
    if not math.isfinite(value):
        raise exception.InvalidTemplate(
            '%s is not a finite number' % node.value,
            line=node.start_mark.line + 1)
    return value


Loader.add_constructor('tag:yaml.org,2002:float', _construct_float)


def _construct_int(loader, node):
    """An integer; one of more digits than Python turns into a number
    from text (4300: sys.get_int_max_str_digits) is refused, as the
    API's JSON reader refuses it."""
    try:
        return loader.construct_yaml_int(node)
    except ValueError:
        raise exception.InvalidTemplate(
            'an integer of %d characters is more than a number may have'
            % len(node.value), line=node.start_mark.line + 1)


def _not_json(loader, node):
    """YAML's types JSON has not (!!binary: bytes, !!set, !!omap,
    !!pairs): a template, an environment and their values are JSON's
    types, which the engine stores and the API answers."""
    raise exception.InvalidTemplate(
        '%s is not a type a template may hold (JSON\'s only: maps, '
        'lists, strings, numbers, booleans, null)' % node.tag.replace(
            'tag:yaml.org,2002:', '!!'), line=node.start_mark.line + 1)


_NOT_JSON = tuple('tag:yaml.org,2002:' + t
                  for t in ('binary', 'set', 'omap', 'pairs'))
Loader.add_constructor('tag:yaml.org,2002:int', _construct_int)
for _tag in _NOT_JSON:
    Loader.add_constructor(_tag, _not_json)

ENV_SECTIONS = ('parameters', 'parameter_defaults', 'resource_registry',
                'event_sinks', 'parameter_merge_strategies',
                'encrypted_param_names', 'converge')


def parse_text(text, filename=None):
    """Parse YAML (or JSON) text; a user error names file and line.

    Both ways of building the document (from parser events, or through
    PyYAML's composer for what that cannot do) count what it expands to
    (see bounds.Expansion) and refuse duplicate keys, naming both lines.
    """
    if text.lstrip().startswith('{'):
        try:
            doc = json.loads(text, object_pairs_hook=_unique_pairs,
                             parse_constant=_no_constant,
                             parse_float=_finite_float)
        except (ValueError, RecursionError, _Unusual):
            pass  # let YAML report it (JSON is mostly YAML), with the line
        else:
            if _json_fits(doc, bounds.Expansion(filename)):
                return doc
    try:
        try:
            return _load_from_events(text, filename)
        except _Unusual:
            return _load_composed(text, filename)
    except exception.InvalidTemplate as e:
        raise e.locate(filename)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else None
        _too_deep(e, filename, line)
        msg = 'Malformed YAML: %s' % (e.problem or e.context or e)
        raise exception.InvalidTemplate(msg, filename=filename, line=line)
    except yaml.YAMLError as e:
        _too_deep(e, filename, None)
        raise exception.InvalidTemplate('Malformed YAML: %s' % e,
                                        filename=filename)


def _too_deep(error, filename, line):
    """libyaml (PyYAML 6.0.4's wheels) refuses flow collections nested
    past its own limit while it scans ahead, before our count of levels
    sees them: that is our depth limit's error too."""
    if 'maximum nesting depth' in str(error):
        raise bounds.Expansion(filename).too_deep(line)


class _Unusual(Exception):
    """A construct the event loader leaves to PyYAML's own (merge keys,
    sets, ordered maps, recursive or duplicate anchors, unhashable keys)."""


def _no_constant(name):
    """JSON's NaN and Infinity, which Python's json reads: the YAML
    path reads them as the strings they are in YAML."""
    raise _Unusual(name)


def _finite_float(text):
    """A JSON float; one past the largest (1e999) would be an infinity:
    the YAML path refuses it with its line."""
    value = float(text)
    if not math.isfinite(value):
        raise _Unusual(text)
    return value


def _unique_pairs(pairs):
    d = dict(pairs)
    if len(d) != len(pairs):
        raise _Unusual('duplicate key')  # the YAML path names the lines
    return d


def _json_fits(doc, exp):
    """Whether a JSON document is within the node and depth limits (it has
    no aliases: its size is the file's) and all text (no lone surrogate,
    which JSON's escapes give and YAML's refuse). If not, the YAML path
    finds the line where it goes over, or refuses the escape with its
    line."""
    nodes = 0
    todo = [(doc, 0)]
    while todo:
        v, depth = todo.pop()
        nodes += 1
        if isinstance(v, dict):
            nodes += len(v)
            items = v.values()
            if any(bounds.lone_surrogate(k) for k in v):
                return False
        elif isinstance(v, list):
            items = v
        else:
            if isinstance(v, str) and bounds.lone_surrogate(v):
                return False
            continue
        if depth + 1 > exp.max_depth:
            return False
        todo.extend((x, depth + 1) for x in items)
    return nodes <= exp.max_nodes


_STR = 'tag:yaml.org,2002:str'
_MAP = (None, '!', 'tag:yaml.org,2002:map')
_SEQ = (None, '!', 'tag:yaml.org,2002:seq')
_MERGE = 'tag:yaml.org,2002:merge'
_PLAIN_SCALARS = frozenset('tag:yaml.org,2002:' + t for t in (
    'null', 'bool', 'int', 'float', 'timestamp', 'binary'))


def _load_from_events(text, filename=None):
    """The document, built straight from the parser's events.

    yaml.load composes a node tree of the whole document (each node with
    two position marks) before it builds a single dict: for a
    22,000-resource template that tree is 160 MB that the process keeps as
    its peak. Building from events holds one event at a time; scalars are
    still resolved and constructed by the loader's own resolver and
    constructors, so the values are those yaml.load gives. Anything else
    raises _Unusual and is left to _load_composed.

    An alias gives the anchored object itself (not a copy), so loading
    costs nothing more for it; what it stands for is counted all the same,
    since storing or walking the document expands it.
    """
    ldr = Loader(text)
    try:
        ldr.get_event()  # stream start
        if ldr.check_event(yaml.StreamEndEvent):
            return None
        ldr.get_event()  # document start
        doc = _build(ldr, ldr.get_event(), {}, bounds.Expansion(filename),
                     0)
        ldr.get_event()  # document end
        if not ldr.check_event(yaml.StreamEndEvent):
            raise _Unusual('more than one document')
        return doc
    finally:
        ldr.dispose()


def _build(ldr, ev, anchors, exp, depth):
    """The value of the node starting with `ev`, `depth` maps and lists
    deep. anchors: name -> (value, nodes, chars, height) where height is
    how many levels of maps and lists the anchored node holds."""
    if isinstance(ev, yaml.AliasEvent):
        if ev.anchor not in anchors:
            raise _Unusual('alias to an unfinished node')
        value, nodes, chars, height = anchors[ev.anchor]
        line = ev.start_mark.line + 1
        if height:
            exp.enter(depth + height, line, ev.anchor)
        exp.add(nodes, chars, line, ev.anchor)
        return value
    if ev.anchor is not None:
        before = exp.nodes, exp.chars, exp.level
        exp.level = depth
    if isinstance(ev, yaml.ScalarEvent):
        exp.nodes += 1
        exp.chars += len(ev.value)
        if exp.nodes > exp.max_nodes or exp.chars > exp.max_chars:
            exp.add(0, 0, ev.start_mark.line + 1)
        tag = ev.tag
        if tag is None or tag == '!':
            tag = ldr.resolve(yaml.ScalarNode, ev.value, ev.implicit)
        if tag == _STR:
            value = ev.value
        elif tag in _PLAIN_SCALARS:
            value = ldr.yaml_constructors[tag](ldr, yaml.ScalarNode(
                tag, ev.value, ev.start_mark, ev.end_mark, ev.style))
        else:
            raise _Unusual(tag)
    else:
        exp.nodes += 1
        if exp.nodes > exp.max_nodes or depth + 1 > exp.level:
            exp.add(0, 0, ev.start_mark.line + 1)
            exp.enter(depth + 1, ev.start_mark.line + 1)
        if isinstance(ev, yaml.MappingStartEvent):
            if ev.tag not in _MAP:
                raise _Unusual(ev.tag)
            value = {}
            while not ldr.check_event(yaml.MappingEndEvent):
                kev = ldr.get_event()
                if isinstance(kev, yaml.ScalarEvent) and kev.value == '<<' \
                        and kev.implicit[0]:
                    raise _Unusual('merge key')
                key = _build(ldr, kev, anchors, exp, depth + 1)
                try:
                    if key in value:
                        # _load_composed names both lines; keeping every
                        # key's line here would slow every load
                        raise _Unusual('duplicate key')
                except TypeError:
                    raise _Unusual('unhashable key')
                value[key] = _build(ldr, ldr.get_event(), anchors, exp,
                                    depth + 1)
            ldr.get_event()
        elif isinstance(ev, yaml.SequenceStartEvent):
            if ev.tag not in _SEQ:
                raise _Unusual(ev.tag)
            value = []
            while not ldr.check_event(yaml.SequenceEndEvent):
                value.append(_build(ldr, ldr.get_event(), anchors, exp,
                                    depth + 1))
            ldr.get_event()
        else:
            raise _Unusual(type(ev).__name__)
    if ev.anchor is not None:
        if ev.anchor in anchors:
            raise _Unusual('duplicate anchor')  # yaml.load reports it
        anchors[ev.anchor] = (value, exp.nodes - before[0],
                              exp.chars - before[1], exp.level - depth)
        exp.level = max(exp.level, before[2])
    return value


class _Events(getattr(yaml, 'CParser', object)):
    """libyaml's parser, when PyYAML has it: only its events are used."""


if _Events.__bases__ == (object,):
    class _Events(yaml.reader.Reader, yaml.scanner.Scanner,  # noqa: F811
                  yaml.parser.Parser):
        def __init__(self, stream):
            yaml.reader.Reader.__init__(self, stream)
            yaml.scanner.Scanner.__init__(self)
            yaml.parser.Parser.__init__(self)


class _ComposingLoader(yaml.composer.Composer, _Events,
                       yaml.constructor.SafeConstructor,
                       yaml.resolver.Resolver):
    """yaml.load's way (a node tree, then objects: merge keys, sets,
    ordered maps, tags), with PyYAML's Python composer over the fast
    parser so that each node can be counted as it is composed: libyaml's
    own composer runs in C, out of reach, and would build the whole tree
    first."""

    def __init__(self, text, exp, filename):
        _Events.__init__(self, text)
        yaml.composer.Composer.__init__(self)
        yaml.constructor.SafeConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)
        self._exp = exp
        self._filename = filename
        self._depth = 0
        self._sizes = {}  # id(anchored node) -> (nodes, chars, height)

    def compose_node(self, parent, index):
        exp = self._exp
        ev = self.peek_event()
        line = ev.start_mark.line + 1
        if isinstance(ev, yaml.AliasEvent):
            node = self.anchors.get(ev.anchor)
            if node is not None:
                size = self._sizes.get(id(node))
                if size is None:
                    raise exp.recursive(ev.anchor, line)
                nodes, chars, height = size
                if height:
                    exp.enter(self._depth + height, line, ev.anchor)
                exp.add(nodes, chars, line, ev.anchor)
            return super().compose_node(parent, index)
        depth = self._depth
        if ev.anchor is not None:
            before = exp.nodes, exp.chars, exp.level
            exp.level = depth
        if isinstance(ev, yaml.ScalarEvent):
            exp.add(1, len(ev.value), line)
            node = super().compose_node(parent, index)
        else:
            exp.add(1, 0, line)
            exp.enter(depth + 1, line)
            self._depth = depth + 1
            try:
                node = super().compose_node(parent, index)
            finally:
                self._depth = depth
            if isinstance(node, yaml.MappingNode):
                self._check_keys(node)
        if ev.anchor is not None:
            self._sizes[id(node)] = (exp.nodes - before[0],
                                     exp.chars - before[1],
                                     exp.level - depth)
            exp.level = max(exp.level, before[2])
        return node

    def _check_keys(self, node):
        """Refuse a key given twice with two values (merge keys aside:
        what they bring in is meant to be overridden). The same key and
        value twice says nothing new, and rendered templates have it
        (TripleO's common/post.yaml: one parameter from two loops of its
        Jinja2 source): it is accepted, as Heat accepts it."""
        lines, values = {}, {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE or \
                    not isinstance(key_node, yaml.ScalarNode):
                continue
            make = self.yaml_constructors.get(key_node.tag)
            try:
                key = make(self, key_node) if make is not None else \
                    (key_node.tag, key_node.value)
                hash(key)
            except Exception:  # noqa: BLE001 - construction reports it
                continue
            line = key_node.start_mark.line + 1
            if key in lines:
                if _same_node(values[key], value_node):
                    continue
                raise bounds.duplicate_key(key, line, lines[key],
                                           self._filename)
            lines[key], values[key] = line, value_node


def _same_node(a, b):
    """Whether two YAML nodes say the same thing (tags and values; where
    they are written aside)."""
    if type(a) is not type(b) or a.tag != b.tag:
        return False
    if isinstance(a, yaml.ScalarNode):
        return a.value == b.value
    if len(a.value) != len(b.value):
        return False
    if isinstance(a, yaml.MappingNode):
        return all(_same_node(ka, kb) and _same_node(va, vb)
                   for (ka, va), (kb, vb) in zip(a.value, b.value))
    return all(_same_node(x, y) for x, y in zip(a.value, b.value))


_ComposingLoader.add_constructor('tag:yaml.org,2002:timestamp',
                                 _construct_str)
_ComposingLoader.add_constructor('tag:yaml.org,2002:float', _construct_float)
_ComposingLoader.add_constructor('tag:yaml.org,2002:int', _construct_int)
for _tag in _NOT_JSON:
    _ComposingLoader.add_constructor(_tag, _not_json)


def _load_composed(text, filename=None):
    ldr = _ComposingLoader(text, bounds.Expansion(filename), filename)
    try:
        return ldr.get_single_data()
    finally:
        ldr.dispose()


def line_in_text(text, path):
    """1-based line of the item at `path` in YAML text, or None.

    Streams parser events and stops as soon as the item is found, so an
    error near the top of a big template is located quickly. If the path
    cannot be followed to the end, the line of the deepest node reached is
    returned.
    """
    if not text:
        return None
    try:
        return _line_from_events(yaml.parse(text, Loader=_Base), path)
    except Exception:
        return None


_OPEN = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSE = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


def _skip(events, ev):
    if not isinstance(ev, _OPEN):
        return
    depth = 1
    for e in events:
        if isinstance(e, _OPEN):
            depth += 1
        elif isinstance(e, _CLOSE):
            depth -= 1
            if depth == 0:
                return


def _line_from_events(events, path):
    node = None
    for ev in events:
        if isinstance(ev, (yaml.ScalarEvent, yaml.AliasEvent) + _OPEN):
            node = ev
            break
    if node is None:
        return None
    line = node.start_mark.line + 1
    for key in path:
        found = False
        if isinstance(node, yaml.MappingStartEvent):
            while True:
                k = next(events)
                if isinstance(k, yaml.MappingEndEvent):
                    break
                v = next(events)
                if isinstance(k, yaml.ScalarEvent) and k.value == str(key):
                    line = k.start_mark.line + 1
                    node, found = v, True
                    break
                _skip(events, k)
                _skip(events, v)
        elif isinstance(node, yaml.SequenceStartEvent) and \
                isinstance(key, int) and key >= 0:
            i = 0
            while True:
                v = next(events)
                if isinstance(v, yaml.SequenceEndEvent):
                    break
                if i == key:
                    line = v.start_mark.line + 1
                    node, found = v, True
                    break
                _skip(events, v)
                i += 1
        if not found:
            return line
    return line


def _read(path, max_size=None, what='Template'):
    try:
        size = os.path.getsize(path)
    except OSError as e:
        raise exception.InvalidTemplate('Could not read %s: %s' % (
            path, e.strerror or e))
    if max_size is not None and size > max_size:
        raise exception.InvalidTemplate(
            '%s size (%d bytes) exceeds maximum allowed size (%d bytes)' % (
                what, size, max_size), filename=path)
    try:
        with open(path, encoding='utf-8') as f:
            return f.read()
    except UnicodeDecodeError:
        raise _not_utf8(path, what)
    except OSError as e:
        raise exception.InvalidTemplate('Could not read %s: %s' % (path, e))


def _not_utf8(path, what):
    """The error of a file that is not UTF-8, naming the line of its
    first byte that is not (the text reader's error counts from the
    start of its last chunk, not of the file)."""
    with open(path, 'rb') as f:
        raw = f.read()
    try:
        raw.decode('utf-8')
    except UnicodeDecodeError as e:
        return exception.InvalidTemplate(
            '%s is not UTF-8 text (%s)' % (what, e.reason), filename=path,
            line=raw[:e.start].count(b'\n') + 1)
    return exception.InvalidTemplate('%s is not UTF-8 text' % what,
                                     filename=path)


def walk_types(node, path, found):
    """(value, key path) of every ``type`` naming a template file in
    `node`: a resource's, and one inside its properties (a group's
    ``resource_def``), into `found` (as python-heatclient looks)."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == 'type' and isinstance(v, str) and _is_template_ref(v):
                found.append((v, path + [k]))
            else:
                walk_types(v, path + [k], found)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            walk_types(v, path + [i], found)


#: the resource types whose property names a template file, and which:
#: read by the client like a provider template
TEMPLATE_PROPERTIES = {'AWS::CloudFormation::Stack': 'TemplateURL'}


def template_refs(tmpl):
    """(reference, key path) of every template file `tmpl` names as a
    resource type (a provider), or as the template of a nested stack
    by URL (AWS::CloudFormation::Stack's TemplateURL), in either
    format."""
    found = []
    fmt = formats.of(tmpl)
    section = fmt.section('resources')
    resources = tmpl.get(section) if isinstance(tmpl, dict) else None
    if not fmt.is_cfn:
        walk_types(resources, [section], found)
        return found
    type_key, props_key = fmt.field('type'), fmt.field('properties')
    for name, r in (resources.items() if isinstance(resources, dict)
                    else ()):
        if not isinstance(r, dict):
            continue
        path = [section, name]
        rtype = r.get(type_key)
        if isinstance(rtype, str) and _is_template_ref(rtype):
            found.append((rtype, path + [type_key]))
        props = r.get(props_key)
        if not isinstance(props, dict):
            continue
        key = TEMPLATE_PROPERTIES.get(rtype)
        url = props.get(key) if key else None
        if isinstance(url, str) and (
                '://' not in url or url.startswith('file://')):
            found.append((url, path + [props_key, key]))
        # a HOT group's resource_def inside CloudFormation's properties
        walk_types(props, path + [props_key], found)
    return found


def walk_get_file(node, path, found):
    """(target, key path) of every get_file in `node`, into `found`."""
    if isinstance(node, dict):
        if len(node) == 1 and 'get_file' in node:
            arg = node['get_file']
            if isinstance(arg, str):
                found.append((arg, path + ['get_file']))
                return
        for k, v in node.items():
            walk_get_file(v, path + [k], found)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            walk_get_file(v, path + [i], found)


def _merge_env(env, new, filename, text):
    if new is None:
        return
    if not isinstance(new, dict):
        raise exception.InvalidTemplate(
            'The environment is not a valid YAML mapping data type.',
            filename=filename, line=1)
    for section, value in new.items():
        if section not in ENV_SECTIONS:
            raise exception.InvalidTemplate(
                'environment has unknown section "%s"' % section,
                path=[section], filename=filename,
                line=line_in_text(text, [section]))
        if value is None:
            continue
        if section in ('parameters', 'parameter_defaults',
                       'resource_registry', 'event_sinks_map',
                       'parameter_merge_strategies', 'converge'):
            if not isinstance(value, dict):
                raise exception.InvalidTemplate(
                    'environment section "%s" must be a map' % section,
                    path=[section], filename=filename,
                    line=line_in_text(text, [section]))
        if section in ('parameters', 'parameter_defaults',
                       'parameter_merge_strategies'):
            env.setdefault(section, {}).update(value)
        elif section == 'resource_registry':
            for path, message in breakpoints.bad_entries(
                    value.get('resources') if isinstance(
                        value.get('resources'), dict) else None):
                path = [section, 'resources'] + path
                raise exception.InvalidTemplate(
                    message, path=path, filename=filename,
                    line=line_in_text(text, path))
            reg = env.setdefault('resource_registry', {})
            for k, v in value.items():
                if k == 'resources' and isinstance(v, dict):
                    rres = reg.setdefault('resources', {})
                    for rname, rmap in v.items():
                        if isinstance(rmap, dict):
                            rres.setdefault(rname, {}).update(rmap)
                        else:
                            rres[rname] = rmap
                else:
                    reg[k] = v
        elif section == 'converge':
            # converge's own: the stack's continuous convergence
            # (observers/loop.py), checked where the stack is stored
            env.setdefault('converge', {}).update(value)
        elif section == 'event_sinks':
            env.setdefault('event_sinks', []).extend(
                value if isinstance(value, list) else [value])
        else:
            env[section] = value


def _empty_env():
    return {'parameters': {}, 'parameter_defaults': {},
            'resource_registry': {}}


class Bundle:
    """A template with its files and merged environment."""

    def __init__(self, template, files=None, environment=None,
                 template_path='<template>', source_text=None, facade=None,
                 base_url=None):
        self.template = template
        self.files = dict(files or {})
        env = _empty_env()
        env.update(environment or {})
        self.environment = env
        self.template_path = template_path
        self.source_text = source_text
        #: a nested stack's: what ``resource_facade`` reads of the resource
        #: that owns it (metadata, deletion_policy, update_policy)
        self.facade = facade
        #: where the template was read from (a file:// URL): what its
        #: relative get_file targets and provider types are relative to
        self.base_url = base_url
        self._lines = {}

    def file_key(self, ref):
        """The files-map key `ref` (as the template writes it) stands
        for: itself when the map has it as written, else the URL it
        names relative to this template."""
        if ref in self.files or not self.base_url:
            return ref
        return join_url(self.base_url, ref)

    def line_of(self, path):
        """Line of the item at `path` (list of keys) in the template."""
        if path is None or self.source_text is None:
            return None
        key = tuple(path)
        if key not in self._lines:
            self._lines[key] = line_in_text(self.source_text, list(path))
        return self._lines[key]

    def to_dict(self):
        d = {'template': self.template, 'files': self.files,
             'environment': self.environment,
             'template_path': self.template_path,
             'source_text': self.source_text}
        if self.facade is not None:
            d['facade'] = self.facade
        if self.base_url is not None:
            d['base_url'] = self.base_url
        return d

    @classmethod
    def from_dict(cls, d):
        return cls(d.get('template') or {}, d.get('files') or {},
                   d.get('environment') or {},
                   d.get('template_path') or '<template>',
                   d.get('source_text'), d.get('facade'),
                   d.get('base_url'))

    def merged_over(self, old):
        """This bundle with its environment layered over `old`'s (for an
        update that keeps the existing environment)."""
        env = _empty_env()
        for src in (old.environment, self.environment):
            _merge_env(env, {k: v for k, v in src.items()
                             if k in ENV_SECTIONS}, None, None)
        files = dict(old.files)
        files.update(self.files)
        return Bundle(self.template, files, env, self.template_path,
                      self.source_text, self.facade, self.base_url)


def file_url(path):
    """The files-map key of a file on this machine: its absolute
    ``file://`` URL, as python-heatclient makes it."""
    return 'file://' + urllib.request.pathname2url(os.path.abspath(path))


def join_url(base, ref):
    """`ref` (a get_file target, a provider type, a registry entry) as
    seen from the document at URL `base`: relative to its directory,
    ``../`` included; an absolute path or a URL as it is."""
    if '://' in ref:
        return ref
    if ref.startswith('/'):
        return file_url(ref)
    if not base:
        return ref
    return urllib.parse.urljoin(base, ref)


def url_path(url):
    return urllib.request.url2pathname(urllib.parse.urlsplit(url).path)


class _Files:
    """The client's side of Heat's files map: every file a template, a
    provider template or an environment names, read relative to the
    document naming it, each once, keyed by its absolute URL."""

    def __init__(self, max_size, given):
        self.max_size = max_size
        self.given = dict(given or {})
        self.files = {}

    def read(self, url, what, where, name=None):
        """The text of `url` (stored in the map); `where` = (document,
        its text, key path) and `name` (the reference as written) for the
        error naming the reference."""
        if url in self.files:
            return self.files[url]
        what = '%s %s' % (what, name or url)
        if not url.startswith('file://'):
            self._fail('%s: only local files can be read' % what, where)
        real = url_path(url)
        err = None
        if not os.path.isfile(real):
            err = '%s: file not found (%s)' % (what, real)
        elif self.max_size is not None and \
                os.path.getsize(real) > self.max_size:
            err = ('%s: file size (%d bytes) exceeds maximum allowed '
                   'size (%d bytes)' % (what, os.path.getsize(real),
                                        self.max_size))
        else:
            try:
                with open(real, encoding='utf-8') as f:
                    self.files[url] = f.read()
            except (OSError, UnicodeDecodeError) as e:
                err = '%s: could not read it: %s' % (what, e)
        if err is not None:
            self._fail(err, where)
        return self.files[url]

    @staticmethod
    def _fail(msg, where):
        doc, text, path = where
        raise exception.InvalidTemplate(
            msg, path=path, filename=doc,
            line=line_in_text(text, path) if text else None)

    def template(self, tmpl, url, doc, text):
        """Every file `tmpl` (the document at `url`) names: its get_file
        targets, and its provider templates with theirs, recursively."""
        found = []
        walk_get_file(tmpl, [], found)
        for name, path in found:
            target = join_url(url, name)
            if name in self.given or target in self.given:
                continue   # given by the caller: not read from the disk
            known = target in self.files
            content = self.read(target, 'get_file', (doc, text, path), name)
            if not known and _is_template_ref(name):
                self._inline(target, content)
        for rtype, path in template_refs(tmpl):
            self.provider(join_url(url, rtype), (doc, text, path), rtype)

    def _inline(self, url, content):
        """A template read by get_file (OS::Heat::Stack's `template`):
        its own files too, relative to it."""
        try:
            tmpl = parse_text(content, url_path(url))
        except exception.InvalidTemplate:
            return   # not a template after all: only a file
        if formats.is_template(tmpl):
            self.template(tmpl, url, url_path(url), content)

    def provider(self, url, where, name=None):
        if url in self.files or url in self.given:
            return
        text = self.read(url, 'provider template', where, name)
        doc = url_path(url)
        tmpl = parse_text(text, doc)
        if not isinstance(tmpl, dict):
            raise exception.InvalidTemplate(
                'The provider template is not a YAML mapping',
                filename=doc, line=1)
        self.template(tmpl, url, doc, text)

    def environment(self, env, url, doc, text):
        """Its resource_registry's files, relative to the environment
        file; each entry rewritten to its URL (as python-heatclient
        does), since the engine cannot know where the file was."""
        reg = env.get('resource_registry') if isinstance(env, dict) else None
        if not isinstance(reg, dict):
            return
        base = reg.get('base_url') or url

        def visit(mapping, path):
            for key, value in list(mapping.items()):
                if key == 'resources' and isinstance(value, dict) and \
                        path == ['resource_registry']:
                    for rname, sub in value.items():
                        if isinstance(sub, dict):
                            visit(sub, path + [key, rname])
                elif isinstance(value, str) and _is_template_ref(value):
                    target = join_url(base, value)
                    self.provider(target, (doc, text, path + [key]), value)
                    mapping[key] = target
        visit(reg, ['resource_registry'])


def _is_template_ref(value):
    """Whether a resource type (or a registry entry) names a template
    file rather than a type (types have no slash and end otherwise)."""
    return ('::' not in value or '://' in value) and (
        value.endswith(('.yaml', '.yml', '.template', '.json')) or
        '/' in value)


def bundle_from_request(template, files=None, environment=None,
                        environment_files=None, max_size=None,
                        base_url=None):
    """The bundle a REST client sent (Heat's create body): the template
    as a mapping or as YAML/JSON text, the files map (every get_file
    target and provider template, keyed as the template names them), the
    environment files named in `environment_files` (their text in
    `files`) merged in order, then `environment` over them. `base_url`
    (converge's CLI sends it) is where the template was read from: the
    files it names relatively are keyed relative to it, as load_bundle
    keys them, so the template is kept as its author wrote it."""
    if template is None:
        raise exception.InvalidInput('No template given: send "template" '
                                     '(template_url is not supported)')
    if not isinstance(files or {}, dict) or not all(
            isinstance(k, str) and isinstance(v, str)
            for k, v in (files or {}).items()):
        raise exception.InvalidInput('"files" must map names to their text')
    text = None
    if isinstance(template, str):
        if max_size and len(template) > max_size:
            raise exception.InvalidTemplate(
                'Template size (%d bytes) exceeds maximum allowed size '
                '(%d bytes)' % (len(template), max_size), filename='template')
        text = template
        template = parse_text(text, 'template')
    if not isinstance(template, dict):
        raise exception.InvalidTemplate(
            'The template is not a JSON object or YAML mapping.',
            filename='template', line=1)
    env = _empty_env()
    for name in environment_files or ():
        if name not in (files or {}):
            raise exception.InvalidInput(
                'Environment file %s is named in environment_files but '
                'not sent in files' % name)
        env_text = files[name]
        _merge_env(env, parse_text(env_text, name), name, env_text)
    if isinstance(environment, str):
        environment = parse_text(environment, 'environment')
    _merge_env(env, environment or {}, 'environment', None)
    if base_url is not None and not isinstance(base_url, str):
        raise exception.InvalidInput('template_base_url must be a URL')
    return Bundle(template, files, env, 'template', text,
                  base_url=base_url or None)


def load_bundle(template_path, environment_paths=(), max_size=None,
                extra_files=None):
    """Read a template, its environments and every file they name (as
    python-heatclient does: get_file targets and provider templates
    relative to the file naming them, registry entries relative to the
    environment file)."""
    text = _read(template_path, max_size)
    tmpl = parse_text(text, template_path)
    if not isinstance(tmpl, dict):
        raise exception.InvalidTemplate(
            'The template is not a JSON object or YAML mapping.',
            filename=template_path, line=1)

    reader = _Files(max_size, extra_files)
    env = _empty_env()
    for env_path in environment_paths or ():
        env_text = _read(env_path, max_size, what='Environment')
        new = parse_text(env_text, env_path)
        reader.environment(new, file_url(env_path), env_path, env_text)
        _merge_env(env, new, env_path, env_text)
    url = file_url(template_path)
    reader.template(tmpl, url, template_path, text)
    files = reader.files
    if extra_files:
        files.update(extra_files)
    return Bundle(tmpl, files, env, template_path, text, base_url=url)
