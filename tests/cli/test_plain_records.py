"""The records gsub builds without dataclasses: the configuration read as PlainSettings is the Config the daemon
reads (same values, same refusals), and a submission's Options behave as the frozen dataclass they were."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from gridsched.protocol.config import Config, ConfigError, PlainSettings, Settings, parse, parse_settings
from gridsched.submission.options import replace
from gridsched.submission.submit import Options

GOOD = [
    {},
    {"scheduler": {"policy": "easy", "p": "auto", "threshold": 0, "predictor": "auto"}},
    {"scheduler": {"backfill_order": "shortest", "yield_affinity": "tree", "tune_every": "2h"}},
    {"priority": {"weight_age": 10, "weight_fairshare": 2.5, "half_life": 0, "favor_small": True}},
    {"limits": {"max_cpus_per_user": 3, "max_array_tasks": 7}, "resources": {"floating": {"lic": 2}}},
    {"devices": {"gpu": {"share": 2, "exclusive": True}, "enforce": "off"}, "machine": {"cpus": "0-1"}},
    {"mail": {"sendmail": "/usr/sbin/sendmail", "from": "gs@example.org"}, "reservations": {"users": ["*"]}},
]
BAD = [
    {"scheduler": {"policy": "lottery"}},
    {"scheduler": {"p": 1.5}},
    {"priority": {"weight_age": -1}},
    {"resources": {"floating": {"mem": 4}}},
    {"devices": {"GPU": {"share": 1}}},
    {"machine": {"cpus": "3-1"}},
    {"jobs": {"default_walltime": "2d", "max_walltime": "1d"}, "scheduler": {"policy": "lottery"}},
    {"nosuch": {}},
]


def test_settings_name_the_fields_of_config():
    names = [f.name for f in dataclasses.fields(Config)]
    assert set(Settings.__annotations__) | {"params", "tuning"} == set(names)
    assert [n for n in PlainSettings.__slots__ if not n.startswith("_")] == [
        n for n in names if n not in ("params", "tuning")
    ]


@pytest.mark.parametrize("data", GOOD)
def test_plain_settings_hold_the_values_of_config(data):
    cfg, plain = parse(data, "x.toml"), parse_settings(data, "x.toml")
    assert isinstance(cfg, Settings) and isinstance(plain, Settings)
    for f in dataclasses.fields(Config):
        assert getattr(plain, f.name) == getattr(cfg, f.name), f.name
    assert plain.max_cpus_per_user == cfg.max_cpus_per_user == cfg.params.max_cpus_per_user
    assert [plain.share("gpu"), plain.exclusive("gpu")] == [cfg.share("gpu"), cfg.exclusive("gpu")]


@pytest.mark.parametrize("data", BAD)
def test_plain_settings_refuse_what_config_refuses(data):
    with pytest.raises(ConfigError) as full:
        parse(data, "x.toml")
    with pytest.raises(ConfigError) as plain:
        parse_settings(data, "x.toml")
    assert str(plain.value) == str(full.value)


def test_plain_settings_are_frozen():
    plain = parse_settings({}, "x.toml")
    with pytest.raises(AttributeError):
        plain.default_ncpus = 4  # type: ignore[misc]
    assert plain.default_ncpus == parse({}, "x.toml").default_ncpus
    again = pickle.loads(pickle.dumps(plain))
    assert [again.path, again.params, again.tuning] == [plain.path, plain.params, plain.tuning]
    assert pickle.loads(pickle.dumps(Options(ncpus=3))) == Options(ncpus=3)


def test_options_behave_as_a_frozen_dataclass():
    o = Options(ncpus=2, name="x")
    assert (o.ncpus, o.name, o.walltime, o.task_sep) == (2, "x", None, "_")
    assert o == Options(name="x", ncpus=2) and hash(o) == hash(Options(name="x", ncpus=2))
    assert o != Options(ncpus=3, name="x")
    assert replace(o, ncpus=3) == Options(ncpus=3, name="x") and o.ncpus == 2
    assert repr(o).startswith("Options(name='x', ncpus=2, walltime=None,")
    assert Options("y").name == "y"  # in order, as a dataclass takes them
    with pytest.raises(AttributeError):
        o.ncpus = 4  # type: ignore[misc]
    with pytest.raises(TypeError, match="unexpected keyword argument 'cores'"):
        Options(cores=2)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="multiple values"):
        Options("y", name="z")  # type: ignore[misc]
