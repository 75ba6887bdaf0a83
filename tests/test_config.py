"""Configuration: the sample file is generated and current; URLs choose
backends; the embedded defaults live in the home."""

import filecmp
import os
import subprocess
import sys

from tests.conftest import REPO


def test_sample_config_is_current(tmp_path):
    out = tmp_path / 'converge.conf.sample'
    gen = os.path.join(os.path.dirname(sys.executable),
                       'oslo-config-generator')
    subprocess.run([gen, '--config-file',
                    os.path.join(REPO, 'etc/oslo-config-generator/'
                                       'converge.conf'),
                    '--output-file', str(out)], check=True, cwd=REPO,
                   capture_output=True)
    assert filecmp.cmp(out, os.path.join(REPO, 'etc/converge/'
                                               'converge.conf.sample'),
                       shallow=False), \
        'etc/converge/converge.conf.sample is stale: regenerate it with ' \
        'oslo-config-generator --config-file ' \
        'etc/oslo-config-generator/converge.conf'


def test_embedded_defaults_live_in_the_home(tmp_path):
    from converge import conf
    conf.setup([], home=str(tmp_path), log=False)
    assert conf.database_url() == 'sqlite:///%s/converge.db' % tmp_path
    assert conf.sim_url() == 'sqlite:///%s/sim.db' % tmp_path
    assert conf.coordination_url() == 'file://%s/locks' % tmp_path
    assert conf.is_embedded()


def test_config_file_chooses_backends_by_url(tmp_path):
    cfg = tmp_path / 'c.conf'
    cfg.write_text('[DEFAULT]\ntransport_url = rabbit://guest:guest@h:5672/\n'
                   '[database]\nconnection = postgresql+psycopg2://u@h/c\n'
                   '[coordination]\nbackend_url = redis://h:6379\n')
    from converge import conf
    conf.setup([], default_config_files=[str(cfg)], log=False)
    try:
        assert conf.database_url().startswith('postgresql+psycopg2://')
        assert conf.coordination_url() == 'redis://h:6379'
        assert not conf.is_embedded()
    finally:
        conf.setup([], log=False)
