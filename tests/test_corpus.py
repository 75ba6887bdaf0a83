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


AUTOSCALING = {
    # the corpus's AutoScalingGroup templates: valid, or stopped only by
    # types other than the group's and its policies'
    'heat-templates/hot/asg_of_servers.yaml': 'valid',
    'heat-templates/hot/asg_of_stacks.yaml': 'valid',
    'heat-templates/hot/autohealing/autohealing_group.yaml': 'unsupported',
    'heat-templates/hot/autoscaling.yaml': 'unsupported',
}


@pytest.mark.skipif(not TEMPLATES, reason='corpus not found at %s' % CORPUS)
@pytest.mark.parametrize('rel,expected', sorted(AUTOSCALING.items()))
def test_autoscaling_corpus_templates(rel, expected):
    from converge import conf
    conf.setup([], log=False)
    verdict, detail = corpus.check(CORPUS, rel)
    assert verdict == expected, detail
    assert 'AutoScalingGroup' not in detail or verdict == 'valid'
    assert 'ScalingPolicy' not in detail or verdict == 'valid'
