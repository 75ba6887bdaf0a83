"""Every corpus template whose types converge supports passes validation."""

import os
import sys

import pytest

from tests.conftest import CORPUS, REPO

sys.path.insert(0, os.path.join(REPO, 'tools'))
import corpus  # noqa: E402

TEMPLATES = list(corpus.top_level(CORPUS)) if os.path.isdir(CORPUS) else []


@pytest.mark.skipif(not TEMPLATES, reason='corpus not found at %s' % CORPUS)
@pytest.mark.parametrize('rel', TEMPLATES)
def test_corpus_template(rel):
    from converge import conf
    conf.setup([], log=False)
    verdict, detail = corpus.check(CORPUS, rel)
    assert verdict in ('valid', 'unsupported', 'refused', 'needs input'), \
        detail


def test_some_corpus_templates_are_supported():
    if not TEMPLATES:
        pytest.skip('corpus not found at %s' % CORPUS)
    from converge import conf
    conf.setup([], log=False)
    valid = [r for r in TEMPLATES if corpus.check(CORPUS, r)[0] == 'valid']
    assert len(valid) >= 5
