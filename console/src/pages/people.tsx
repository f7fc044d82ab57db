/**
 * People and invitations (admins and owners): who may sign in, with which role; invite by email (the
 * link is shown to pass on: the platform sends no mail); change a role; remove a person (their
 * sessions end within a minute). A role is offered only up to the inviter's own.
 */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { api, listOf, seg, useApi } from '../api';
import { ROLES, can, type Me, type Role } from '../roles';
import { cellText, ConfirmButton, CopyField, ErrorText, LoadState, Section, Select, Table, TextField, Time, useAction } from '../ui';

interface Person {
  id: string;
  email: string;
  role: Role;
  created_at?: string;
  last_sign_in_at?: string | null;
}
interface Invitation {
  id?: string;
  email: string;
  role: Role;
  expires_at?: string;
  used_at?: string | null;
  status?: string;
  created_at?: string;
}

export function PeoplePage({ me }: { me: Me }): JSX.Element {
  const people = useApi<unknown>('/people');
  const invitations = useApi<unknown>('/invitations');
  const list = listOf<Person>(people.data, 'people');
  const invs = listOf<Invitation>(invitations.data, 'invitations');
  const grantable = ROLES.filter((r) => can(me.person.role, r));
  return (
    <>
      <Section title="People">
        <LoadState of={people} what="people" />
        {list.length ? (
          <Table columns={['Email', 'Role', 'Joined', 'Actions']}>
            {list.map((p) => (
              <PersonRow key={p.id} person={p} me={me} grantable={grantable} onChanged={people.reload} />
            ))}
          </Table>
        ) : null}
      </Section>
      <Invite grantable={grantable} onInvited={invitations.reload} />
      <Section title="Invitations">
        <LoadState of={invitations} what="invitations" count={invs.length} empty="No invitations." />
        {invs.length ? (
          <Table columns={['Email', 'Role', 'Status', 'Expires']}>
            {invs.map((i, n) => (
              <tr key={i.id ?? n}>
                <td>{i.email}</td>
                <td>{i.role}</td>
                <td>{i.status ?? (i.used_at ? 'used' : 'pending')}</td>
                <td>
                  <Time value={i.expires_at} />
                </td>
              </tr>
            ))}
          </Table>
        ) : null}
      </Section>
    </>
  );
}

function PersonRow({ person, me, grantable, onChanged }: { person: Person; me: Me; grantable: readonly Role[]; onChanged: () => void }): JSX.Element {
  const [role, setRole] = useState<string>(person.role);
  const { error, run } = useAction();
  const self = person.id === me.person.id;
  // An admin does not change an owner (nor anyone above their own role).
  const mayChange = !self && can(me.person.role, person.role);
  const call = (method: 'PATCH' | 'DELETE', body?: unknown) =>
    run(async () => {
      await api(method, `/people/${seg(person.id)}`, body);
      onChanged();
    });
  return (
    <tr>
      <td>
        {person.email}
        {self ? <span class="muted"> (you)</span> : null}
      </td>
      <td>
        {mayChange ? (
          <span class="inline">
            <Select hideLabel label={`Role of ${person.email}`} value={role} onValue={setRole} options={grantable.map((r) => [r, r] as const)} />
            <button type="button" onClick={() => void call('PATCH', { role })} disabled={role === person.role}>
              Save role
            </button>
          </span>
        ) : (
          person.role
        )}
      </td>
      <td>
        <Time value={person.created_at} />
      </td>
      <td>
        {mayChange ? <ConfirmButton label="Remove" confirmLabel={`Confirm removing ${person.email}`} onConfirm={() => call('DELETE')} /> : cellText(null)}
        <ErrorText error={error} />
      </td>
    </tr>
  );
}

function Invite({ grantable, onInvited }: { grantable: readonly Role[]; onInvited: () => void }): JSX.Element {
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<string>('viewer');
  const [days, setDays] = useState('7');
  const { error, submit } = useAction();
  const [link, setLink] = useState<{ url: string; expires: string } | undefined>();
  const send = submit(async () => {
    setLink(undefined);
    const a = await api<{ invitation_url: string; expires_at: string }>('POST', '/invitations', { email: email.trim(), role, expires_in_hours: Number(days) * 24 });
    setLink({ url: a.invitation_url, expires: a.expires_at });
    setEmail('');
    onInvited();
  });
  return (
    <Section title="Invite a person">
      <form class="inline-form" onSubmit={send} aria-label="Invite a person">
        <TextField label="Email" type="email" value={email} onValue={setEmail} error={error?.param === 'email' ? error : undefined} />
        <Select label="Role" value={role} onValue={setRole} options={grantable.map((r) => [r, r] as const)} />
        <Select
          label="Expires in"
          value={days}
          onValue={setDays}
          options={[
            ['1', '1 day'],
            ['7', '7 days'],
            ['14', '14 days'],
          ]}
        />
        <button type="submit" class="primary">
          Create invitation
        </button>
      </form>
      {error && error.param !== 'email' ? <ErrorText error={error} /> : null}
      {link ? (
        <div class="notice">
          <CopyField label="Invitation link" value={link.url} hint="Send it to the person yourself; it works once." />
          <p>
            Expires <Time value={link.expires} />.
          </p>
        </div>
      ) : null}
    </Section>
  );
}
