"""Which protocol downloads a dataset: its catalog entry's source (MLCommons R2, the Hugging Face Hub, a FiftyOne
fetch folder) unless flags name another (an R2 ``.uri``, a hub repository at a commit, a URL list); what
``mlperf-wf download`` runs."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mlperf_wf.errors import ConfigError, DownloadError, UserError
from mlperf_wf.kinds import Scale

if TYPE_CHECKING:
    from mlperf_wf.acquire.download import DownloadRecord
    from mlperf_wf.config.registry import DatasetDef


@dataclass(frozen=True)
class HubOptions:
    """``mlperf-wf download``'s hub flags; None takes the catalog's value."""

    endpoint: str | None = None
    """Base URL of the hub (``--endpoint``)."""
    repository: str | None = None
    """OWNER/NAME (``--repository``)."""
    repository_type: str | None = None
    """dataset or model (``--repo-type``)."""
    revision: str | None = None
    """The 40-hex commit (``--revision``)."""

    def given(self) -> bool:
        return any(value is not None for value in asdict(self).values())


def _download_from_hub(definition: DatasetDef | None, dest: Path, options: HubOptions, jobs: int) -> DownloadRecord:
    """A hub repository at a pinned commit; the catalog's pins apply when its own endpoint, repository and commit are used."""
    from mlperf_wf.acquire.hub import HubRepo, download_hub_dataset

    source = definition.source if definition else None
    repository = options.repository or (source and source.repository)
    revision = options.revision or (source and source.revision)
    if not repository or not revision:
        raise ConfigError("download: a hub repository needs --dataset (a catalog id) or --repository OWNER/NAME with --revision COMMIT")
    repo = HubRepo(
        endpoint=options.endpoint or (source.endpoint if source else "https://huggingface.co"),
        repository=repository,
        repository_type=options.repository_type or (source.repository_type if source else "dataset"),
        revision=revision,
    )
    catalog = source is not None and (repo.endpoint, repo.repository, repo.repository_type, repo.revision) == (
        source.endpoint,
        source.repository,
        source.repository_type,
        source.revision,
    )
    wanted = definition.wanted if definition else (lambda _path: True)
    return download_hub_dataset(
        repo, dest, wanted=wanted, pinned=definition.files if catalog else None, jobs=jobs, catalog_endpoint=source.endpoint if source else None
    )


def _receive_fiftyone(definition: DatasetDef | None, dest: Path, source: str | None, expect: str, jobs: int) -> DownloadRecord:
    """A FiftyOne fetch folder, checked against the catalog's counts and pins (``expect`` catalog) or the tiny mirror's."""
    from mlperf_wf.acquire.fiftyone import ZooExpectations, receive_zoo_dataset
    from mlperf_wf.config import registry

    if definition is None or definition.source.protocol != "fiftyone":
        raise ConfigError(
            f"download: --source is the fiftyone protocol's flag; give --dataset with a fiftyone catalog id (got {definition.id if definition else 'none'})"
        )
    if not source:
        raise ConfigError(f"download: {definition.id} is received from the folder its fetch wrote: give --source file:FOLDER. {definition.source.instructions}")
    where = registry.dataset_where(definition.id)
    if expect == Scale.TINY:
        if definition.tiny is None or not definition.tiny.splits:
            raise ConfigError(f"{where}: --expect tiny needs tiny.splits (the tiny mirror's images per split)")
        expected = ZooExpectations(definition.tiny.splits, definition.source.labels_file, tuple(definition.tiny.files), f"{where} tiny.splits/tiny.files")
    elif expect == "catalog":
        expected = ZooExpectations(definition.source.splits, definition.source.labels_file, tuple(definition.files), f"{where} source.splits/files")
    else:
        raise ConfigError(f"download: --expect {expect!r}: allowed catalog (the published dataset) or tiny (its tiny mirror)")
    return receive_zoo_dataset(source, dest, expected, definition.source.instructions or "", jobs)


def download(
    dataset: str | None,
    dest: Path,
    uri: str | None,
    md5: str | None,
    url_list: Path | None,
    jobs: int,
    hub: HubOptions | None = None,
    source: str | None = None,
    expect: str = "catalog",
) -> DownloadRecord:
    """Download into ``dest``: a catalog dataset (R2 or hub; its source unless flags override it), any R2 ``uri``,
    any hub repository at a revision (``hub``), a FiftyOne fetch folder (``source``) or a ``url_list``."""
    from mlperf_wf.acquire.download import ACCESS_REFUSED, download_dataset, download_url_list
    from mlperf_wf.config.registry import load_dataset

    hub = hub or HubOptions()
    definition = load_dataset(dataset) if dataset else None
    protocol = definition.source.protocol if definition else None
    if protocol == "fiftyone" or source:
        return _receive_fiftyone(definition, dest, source, expect, jobs)
    if url_list:
        return download_url_list(url_list, dest, jobs=jobs)
    if protocol == "huggingface" or (protocol is None and hub.given()):
        if uri or md5:
            raise ConfigError(f"download: --uri/--md5 are R2 flags; {dataset or 'a hub repository'} is downloaded from the Hugging Face Hub (--endpoint)")
        return _download_from_hub(definition, dest, hub, jobs)
    if hub.given():
        raise ConfigError(f"download: --endpoint/--repository/--repo-type/--revision are hub flags; {dataset} is protocol {protocol}")
    if protocol == "external" and not uri:
        raise UserError(f"{dataset} is not on MLCommons R2 and is not downloaded by the workflow: {definition.source.instructions}")
    if protocol == "made_in_image" and not uri:
        raise UserError(
            f"{dataset} is not published: a one-off job of {definition.source.made_by}'s image makes it at full scale "
            "(the workflow's make_in_image rule, before that benchmark's runs)"
        )
    if definition is None and not uri:
        raise ConfigError("download: give --dataset (a catalog id), --uri (an R2 .uri URL), --repository with --revision (hub) or --url-list FILE")
    uri_url = uri or definition.source.uri
    md5_url = md5 or (uri_url.removesuffix(".uri") + ".md5" if uri else definition.source.md5)
    # The catalog's md5 pins describe its own source: a mirror given with --uri publishes other files.
    catalog = definition is not None and uri_url == definition.source.uri
    pinned = {f.path: f.md5 for f in definition.files if f.md5} if catalog else None
    wanted = definition.wanted if definition else (lambda _path: True)
    try:
        # The credentials go to the catalog entry's hosts (and the allowlist), never to a host only --uri names.
        catalog_urls = tuple(u for u in (definition.source.uri, definition.source.md5) if u) if definition else ()
        return download_dataset(uri_url, md5_url, dest, wanted=wanted, pinned_md5=pinned, jobs=jobs, catalog_urls=catalog_urls)
    except DownloadError as err:
        if definition is None or ACCESS_REFUSED not in str(err):
            raise
        raise DownloadError(f"{err}. {definition.id}'s access, as the catalog says: {definition.license}") from None
