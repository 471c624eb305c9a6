"""The packages and the one C extension; the rest is in pyproject.toml.

- ``broker``, ``connector``, ``jobs``, and ``conf/`` as the package ``rmq_conf``: the jobs read their defaults
  (``jobs.conf``, ``spark-defaults.conf``) through it, so an installed wheel has them wherever it runs, and a checkout
  (an editable install maps ``rmq_conf`` to ``conf/``) reads the files users edit. The servers' sample configs ship too.
- ``broker/console/static/``: the console's page (HTML, CSS, JavaScript modules), served as files.
- ``broker._speedups`` (the store's per-message loops, the remoting header codec, the batch body and the pull body's
  Arrow columns) is ``optional``:
  without a C compiler the install still succeeds, and the same loops run in Python.
"""

from setuptools import Extension, find_namespace_packages, setup

setup(
    packages=[*find_namespace_packages(include=["broker*", "connector*", "jobs*"]), "rmq_conf"],
    package_dir={"rmq_conf": "conf"},
    package_data={"rmq_conf": ["*.conf", "dledger/*.conf"], "broker.console": ["static/*.*", "static/pages/*.js"]},
    ext_modules=[Extension("broker._speedups",
                           ["broker/_speedups.c", "broker/_speedups_remoting.c", "broker/_speedups_batch.c",
                            "broker/_speedups_pull.c", "broker/_speedups_read.c",
                            "broker/_speedups_send.c"],
                           depends=["broker/_speedups.h"], libraries=["z"], extra_compile_args=["-O2"],
                           optional=True)],
)
