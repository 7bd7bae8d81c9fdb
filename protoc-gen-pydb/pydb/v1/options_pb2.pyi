from google.protobuf import descriptor_pb2 as _descriptor_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Cardinality(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CARDINALITY_UNSPECIFIED: _ClassVar[Cardinality]
    CARDINALITY_ONE: _ClassVar[Cardinality]
    CARDINALITY_OPTIONAL: _ClassVar[Cardinality]
    CARDINALITY_MANY: _ClassVar[Cardinality]
    CARDINALITY_EXEC: _ClassVar[Cardinality]
CARDINALITY_UNSPECIFIED: Cardinality
CARDINALITY_ONE: Cardinality
CARDINALITY_OPTIONAL: Cardinality
CARDINALITY_MANY: Cardinality
CARDINALITY_EXEC: Cardinality
SQL_FIELD_NUMBER: _ClassVar[int]
sql: _descriptor.FieldDescriptor
SCHEMA_FIELD_NUMBER: _ClassVar[int]
schema: _descriptor.FieldDescriptor

class Sql(_message.Message):
    __slots__ = ("query", "cardinality", "result_field")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    CARDINALITY_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_FIELD_NUMBER: _ClassVar[int]
    query: str
    cardinality: Cardinality
    result_field: str
    def __init__(self, query: _Optional[str] = ..., cardinality: _Optional[_Union[Cardinality, str]] = ..., result_field: _Optional[str] = ...) -> None: ...
