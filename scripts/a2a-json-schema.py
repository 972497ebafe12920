"""Writes e2e/fixtures/a2a-v1.schema.json: A2A 1.0 as JSON Schema, for the tests that hold our A2A answers to it.

The A2A project publishes its JSON Schema only on its site, made from its a2a.proto by bufbuild's
protoc-gen-jsonschema (target=json: the JSON field names) and bundled into one file. No registry
package ships that file, so this does the same from what registries do ship: the a2a.proto
descriptor in a2a-sdk (the A2A project's Python SDK, PyPI) and google.rpc.ErrorInfo, which A2A 1.0's
JSON-RPC errors carry, from googleapis-common-protos. Descriptors carry no comments, so the schema
has no descriptions; what it allows is the same.

    python3 -m venv /tmp/a2a-schema && /tmp/a2a-schema/bin/pip install protobuf==5.29.3 googleapis-common-protos==1.75.0
    /tmp/a2a-schema/bin/pip install --no-deps --target /tmp/a2a-schema/sdk a2a-sdk==1.3.0
    GOBIN=/tmp/a2a-schema/bin go install github.com/bufbuild/protoschema-plugins/cmd/protoc-gen-jsonschema@v0.6.0
    PYTHONPATH=/tmp/a2a-schema/sdk /tmp/a2a-schema/bin/python scripts/a2a-json-schema.py /tmp/a2a-schema/bin/protoc-gen-jsonschema
"""

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

from google.protobuf import descriptor_pb2
from google.protobuf.compiler import plugin_pb2
from google.rpc import error_details_pb2

from a2a.types import a2a_pb2

OUT = Path(__file__).resolve().parent.parent / 'e2e' / 'fixtures' / 'a2a-v1.schema.json'


def with_dependencies(file, seen, out):
    """The file and every file it imports, imports first, as protoc hands them to a plugin."""
    if file.name in seen:
        return
    seen.add(file.name)
    for dependency in file.dependencies:
        with_dependencies(dependency, seen, out)
    proto = descriptor_pb2.FileDescriptorProto()
    file.CopyToProto(proto)
    out.append(proto)


def main(plugin):
    files = []
    seen = set()
    for file in (a2a_pb2.DESCRIPTOR, error_details_pb2.DESCRIPTOR):
        with_dependencies(file, seen, files)
    request = plugin_pb2.CodeGeneratorRequest(
        file_to_generate=[a2a_pb2.DESCRIPTOR.name, error_details_pb2.DESCRIPTOR.name],
        parameter='target=json',
        proto_file=files,
    )
    answer = plugin_pb2.CodeGeneratorResponse.FromString(
        subprocess.run([plugin], input=request.SerializeToString(), capture_output=True, check=True).stdout
    )
    if answer.error:
        sys.exit(answer.error)
    plugin_version = subprocess.run([plugin, '--version'], capture_output=True, text=True, check=True).stdout.strip()
    schemas = {}
    for generated in answer.file:
        schema = json.loads(generated.content)
        name = schema['$id'].removesuffix('.jsonschema.json')
        # Of google.rpc's error details, A2A's JSON-RPC errors carry ErrorInfo.
        if name.startswith('google.rpc.') and name != 'google.rpc.ErrorInfo':
            continue
        del schema['$schema']
        schemas[name] = schema
    bundle = {
        '$schema': 'https://json-schema.org/draft/2020-12/schema',
        '$comment': (
            f'A2A 1.0 ({a2a_pb2.DESCRIPTOR.package}) as JSON Schema, made as the A2A project makes its own '
            f'(github.com/a2aproject/A2A, scripts/proto_to_json_schema.sh: bufbuild protoc-gen-jsonschema {plugin_version}, target=json) '
            f"from the a2a.proto that a2a-sdk {version('a2a-sdk')} (PyPI) ships, with google.rpc.ErrorInfo from "
            f"googleapis-common-protos {version('googleapis-common-protos')}. Each schema keeps the $id its $refs name. "
            'Regenerate with scripts/a2a-json-schema.py; do not edit.'
        ),
        '$defs': dict(sorted(schemas.items())),
    }
    OUT.write_text(json.dumps(bundle, indent=2) + '\n')
    print(f'wrote {OUT} with {len(schemas)} schemas')


if __name__ == '__main__':
    main(sys.argv[1])
